//! Loading ONNX Runtime and building sessions: the one place that decides where the runtime
//! library comes from and which execution provider runs a model.

use std::path::PathBuf;
use std::sync::OnceLock;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use crate::{ModelError, models_dir};

/// Where a model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionProvider {
    #[default]
    Cpu,
}

impl ExecutionProvider {
    pub fn name(self) -> &'static str {
        match self {
            ExecutionProvider::Cpu => "cpu",
        }
    }
}

/// The ONNX Runtime library: `$ORT_DYLIB_PATH`, else the copy `models/fetch` unpacked.
pub fn runtime_library() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| models_dir().join("onnxruntime").join("libonnxruntime.so"))
}

static ENVIRONMENT: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();

/// Loads the runtime once per process; later calls return the same environment (or error).
pub fn environment() -> Result<&'static ort::environment::Environment, ModelError> {
    let library = runtime_library();
    let env = ENVIRONMENT.get_or_init(|| {
        if !library.is_file() {
            return Err("file not found".to_string());
        }
        ort::init_from(&library)
            .map_err(|e| e.to_string())?
            .with_name("stillweb")
            .build()
            .map_err(|e| e.to_string())
    });
    env.as_ref().map_err(|message| ModelError::Runtime {
        path: library,
        message: message.clone(),
    })
}

/// Opens `path` as a session on `provider` with `threads` intra-op threads.
pub fn open_session(
    path: &std::path::Path,
    provider: ExecutionProvider,
    threads: usize,
) -> Result<Session, ModelError> {
    if !path.is_file() {
        return Err(ModelError::Missing {
            path: path.to_path_buf(),
            hint: "run `models/fetch` (or point the model config at the right file)".into(),
        });
    }
    let env = environment()?;
    let builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::All)?
        .with_intra_threads(threads.max(1))?;
    let mut builder = match provider {
        ExecutionProvider::Cpu => builder,
    };
    let session = builder.commit_from_file(path)?;
    tracing::info!(model = %path.display(), provider = provider.name(), threads, "model loaded");
    Ok(session)
}
