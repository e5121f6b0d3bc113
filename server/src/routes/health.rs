use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Liveness: the process answers.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: the index is open and warmed up, and the server is not draining.
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    if state.is_ready() {
        Ok(Json(json!({"status": "ready", "index": state.build_id()})))
    } else {
        Err(ApiError::new(
            ErrorCode::NotReady,
            "not ready: starting up or shutting down",
        ))
    }
}
