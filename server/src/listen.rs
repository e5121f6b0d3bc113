//! The accept loop: HTTP/1.1 connections with their header timeout, and shutdown.
//!
//! On a stop signal the server reports not ready, stops accepting, and lets each connection's
//! request in flight finish (for at most `--shutdown-drain-secs` in all). A connection with no
//! request in flight is closed at once, whatever it is doing: idle between keep-alive requests
//! (HAProxy and coordinators keep such connections to every server) or part-way through a
//! request's headers (a slow or hostile client). Only requests a handler has started hold a
//! shutdown, so a server that is not working stops in milliseconds.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::{AppState, app};

/// How often a stopping connection checks whether a request is still in flight on it: also the
/// time a response already handed to hyper has to reach the socket before its idle connection
/// is closed.
const STOPPING_POLL: Duration = Duration::from_millis(100);

/// Serves HTTP/1.1 connections from `listener` until `stop` completes. Each connection must send
/// a request's headers within `--header-read-timeout-secs` (which also closes idle keep-alive
/// connections); bodies are bounded by the `observe` middleware. On `stop` the server reports
/// not ready, stops accepting, closes every connection with no request in flight, lets the
/// requests in flight finish for at most `--shutdown-drain-secs`, then returns, dropping whatever
/// connections remain.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    stop: impl Future<Output = ()>,
) {
    let router = app(state.clone());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(state.config.header_read_timeout);
    // Every connection's task holds a receiver: the drain is over when all are gone.
    let (stopping, watch_stop) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment instead of spinning.
                    warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let service = Counted {
            router: router.clone(),
            in_flight: in_flight.clone(),
        };
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        tokio::spawn(serve_connection(connection, in_flight, watch_stop.clone()));
    }
    drop(listener);
    drop(watch_stop);
    state.set_ready(false);
    let drain = state.config.shutdown_drain;
    info!(
        drain_secs = drain.as_secs(),
        "shutting down: finishing in-flight requests"
    );
    stopping.send_replace(true);
    if tokio::time::timeout(drain, stopping.closed())
        .await
        .is_err()
    {
        warn!(
            drain_secs = drain.as_secs(),
            "in-flight requests did not finish within the drain deadline; closing their connections"
        );
    }
}

type Connection =
    hyper::server::conn::http1::Connection<hyper_util::rt::TokioIo<tokio::net::TcpStream>, Counted>;

/// Runs one connection until it ends or, once the server is stopping, until no request is in
/// flight on it.
async fn serve_connection(
    connection: Connection,
    in_flight: Arc<AtomicUsize>,
    mut stopping: watch::Receiver<bool>,
) {
    tokio::pin!(connection);
    tokio::select! {
        ended = connection.as_mut() => {
            if let Err(e) = ended {
                debug!(error = %e, "connection ended with an error");
            }
            return;
        }
        _ = stopping.wait_for(|&stop| stop) => {}
    }
    // Finish the request in flight, then close (hyper closes an idle connection at once).
    connection.as_mut().graceful_shutdown();
    loop {
        match tokio::time::timeout(STOPPING_POLL, connection.as_mut()).await {
            Ok(_) => return,
            // Nothing started: a client still sending its headers, which would hold the drain
            // until its header timeout. Dropping the connection closes it.
            Err(_) if in_flight.load(Ordering::Acquire) == 0 => return,
            Err(_) => {}
        }
    }
}

/// The router, counting the requests in flight on one connection: from the moment hyper hands
/// one over until its response body has been written.
#[derive(Clone)]
struct Counted {
    router: Router,
    in_flight: Arc<AtomicUsize>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for Counted {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let guard = InFlight::enter(self.in_flight.clone());
        let response = tower::ServiceExt::oneshot(self.router.clone(), request.map(Body::new));
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(Guarded {
                    body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// One request in flight on a connection, until dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(count: Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted in flight until hyper has written it all.
struct Guarded {
    body: Body,
    _guard: InFlight,
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Serves `state` on `127.0.0.1:0` from a thread of its own until the process exits, with the
/// same accept loop as [`crate::run`]; returns the base URL (`http://127.0.0.1:PORT`). For tests
/// and tools that need a real server in process.
pub fn serve_in_background(state: AppState) -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let runtime = tokio::runtime::Runtime::new()?;
    std::thread::Builder::new()
        .name("stillweb-serve".into())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => serve(listener, state, std::future::pending()).await,
                    Err(e) => warn!(error = %e, "cannot serve in the background"),
                }
            });
        })?;
    Ok(url)
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM (what Docker, Kubernetes and Slurm send).
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
