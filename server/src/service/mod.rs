//! The service: what stillweb does for a request, with no HTTP in it. [`search`] answers queries
//! (one or many, with the caches, stage timings and session recording), [`visit`] opens pages
//! (one or many) under the session rules, [`models`] awaits the model batchers, [`limits`] holds the rules for what clients may make
//! the server keep. `routes/` (the native API) and `compat/` (other APIs) only translate each
//! API's request into these calls, and the answers and [`crate::error::ApiError`]s into that
//! API's shape.

pub mod limits;
pub mod models;
pub mod search;
pub mod visit;

pub use search::{Answer, Query, answer, answer_many};
pub use visit::{Page, visit, visit_many};
