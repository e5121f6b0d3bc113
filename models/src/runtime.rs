//! Loading ONNX Runtime and building sessions: the one place that decides where the runtime
//! library comes from and which execution provider runs a model.

use std::path::PathBuf;
use std::sync::OnceLock;

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

use crate::onnx;
use crate::{ModelError, models_dir};

/// Where a model runs. CUDA needs the ONNX Runtime library of the `onnxruntime-gpu` wheel
/// (`ORT_DYLIB_PATH`) and the CUDA/cuDNN libraries it links against; asking for it on a runtime
/// without it is an error at load, never a silent fall-back to the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutionProvider {
    #[default]
    Cpu,
    Cuda {
        device: i32,
    },
}

impl ExecutionProvider {
    pub fn name(self) -> &'static str {
        match self {
            ExecutionProvider::Cpu => "cpu",
            ExecutionProvider::Cuda { .. } => "cuda",
        }
    }
}

impl std::fmt::Display for ExecutionProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecutionProvider::Cpu => f.write_str("cpu"),
            ExecutionProvider::Cuda { device } => write!(f, "cuda:{device}"),
        }
    }
}

impl std::str::FromStr for ExecutionProvider {
    type Err = String;

    /// `cpu`, `cuda` (device 0) or `cuda:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(ExecutionProvider::Cpu),
            "cuda" => Ok(ExecutionProvider::Cuda { device: 0 }),
            other => other
                .strip_prefix("cuda:")
                .and_then(|d| d.parse::<i32>().ok())
                .filter(|d| *d >= 0)
                .map(|device| ExecutionProvider::Cuda { device })
                .ok_or_else(|| format!("unknown execution provider `{other}` (cpu, cuda, cuda:N)")),
        }
    }
}

/// The ONNX Runtime library: `$ORT_DYLIB_PATH`; else, for binaries installed from the wheel,
/// the `onnxruntime` (or `onnxruntime-gpu`) package of the Python environment they were
/// installed into; else the copy `models/fetch` unpacked.
pub fn runtime_library() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            python_runtime(exe.parent()?.parent()?)
        })
        .unwrap_or_else(|| models_dir().join("onnxruntime").join("libonnxruntime.so"))
}

/// `libonnxruntime.so.*` of the `onnxruntime` package in the Python environment at `prefix`
/// (whose `bin/` holds the running binary): `lib/python3.*/site-packages/onnxruntime/capi/`.
fn python_runtime(prefix: &std::path::Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .ok()?
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3"))
        .map(|entry| entry.path().join("site-packages/onnxruntime/capi"))
        .filter_map(|capi| std::fs::read_dir(capi).ok())
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so"))
        })
        .collect();
    // The versioned file (`libonnxruntime.so.1.32.0`), the one the package loads.
    found.sort();
    found.pop()
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
    let builder = Session::builder(env)
        .map_err(onnx)?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(onnx)?
        .with_intra_threads(threads.max(1))
        .map_err(onnx)?;
    let mut builder = match provider {
        ExecutionProvider::Cpu => builder,
        ExecutionProvider::Cuda { device } => builder
            .with_execution_providers([ort::ep::CUDA::default()
                .with_device_id(device)
                .build()
                .error_on_failure()])
            .map_err(|e| {
                ModelError::Onnx(format!(
                    "cannot use CUDA device {device} ({e}); it needs ONNX Runtime's GPU build and \
                     the CUDA libraries (run `models/fetch --gpu`, then `source \
                     MODELS/onnxruntime-gpu/env.sh`) and NVIDIA's driver (libcuda.so.1)"
                ))
            })?,
    };
    let session = builder.commit_from_file(path).map_err(onnx)?;
    tracing::info!(model = %path.display(), %provider, threads, "model loaded");
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_parse_and_print() {
        for (text, provider) in [
            ("cpu", ExecutionProvider::Cpu),
            ("cuda:0", ExecutionProvider::Cuda { device: 0 }),
            ("cuda:3", ExecutionProvider::Cuda { device: 3 }),
        ] {
            assert_eq!(text.parse::<ExecutionProvider>(), Ok(provider));
            assert_eq!(provider.to_string(), text);
        }
        assert_eq!(
            "cuda".parse::<ExecutionProvider>(),
            Ok(ExecutionProvider::Cuda { device: 0 })
        );
        for bad in ["gpu", "cuda:", "cuda:-1", "cuda:x"] {
            assert!(bad.parse::<ExecutionProvider>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_runtime_of_a_python_environment_is_its_onnxruntime_package() {
        let venv = tempfile::tempdir().expect("tempdir");
        assert_eq!(python_runtime(venv.path()), None);
        let capi = venv
            .path()
            .join("lib/python3.11/site-packages/onnxruntime/capi");
        std::fs::create_dir_all(&capi).expect("dir");
        for file in [
            "libonnxruntime_providers_shared.so",
            "libonnxruntime.so.1.32.0",
            "onnxruntime_pybind11_state.so",
        ] {
            std::fs::write(capi.join(file), b"").expect("file");
        }
        assert_eq!(
            python_runtime(venv.path()),
            Some(capi.join("libonnxruntime.so.1.32.0"))
        );
    }
}
