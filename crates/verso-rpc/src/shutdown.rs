//! Waiting for the signal that ends a service process.

/// Completes when the process is asked to stop: SIGINT (Ctrl-C) or, on Unix, SIGTERM
/// (what service managers and container runtimes send). A service awaits it, then stops
/// its servers so requests under way finish.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => {
                        if let Err(e) = r {
                            tracing::warn!(error = %e, "cannot wait for Ctrl-C");
                        }
                    }
                    _ = term.recv() => {}
                }
                return;
            }
            Err(e) => tracing::warn!(error = %e, "cannot wait for SIGTERM"),
        }
    }
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::warn!(error = %e, "cannot wait for Ctrl-C");
    }
}
