//! `stillweb-loadtest`: offers a stillweb server on this machine a measured load and reports what
//! it got: `report.json` (rates, latency percentiles, errors, the server's stage times, CPU and
//! memory) and `report.html` (the same, with latency-over-time and percentile plots).

pub mod client;
pub mod drive;
pub mod html;
pub mod process;
pub mod queries;
pub mod record;
pub mod report;
pub mod rng;
