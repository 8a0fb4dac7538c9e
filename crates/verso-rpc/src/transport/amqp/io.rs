//! The I/O runtime: the one `verso-amqp` thread that runs every connection's tasks,
//! [`OnIo`], which drops amqprs handles there, and [`lock`] for the transport's shared
//! state.

use super::error::AmqpError;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks one of the transport's mutexes. Nothing panics while holding them; the data is
/// recovered if something ever did.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An amqprs connection or channel that is dropped in the I/O runtime's context. amqprs
/// closes one still open when it is dropped, with `tokio::spawn`, which panics outside a
/// runtime: a [`Session`] may be dropped anywhere (the application's last clone of the
/// transport, after its runtime ended).
pub(super) struct OnIo<T>(Option<T>);

impl<T> OnIo<T> {
    pub(super) fn new(value: T) -> Self {
        OnIo(Some(value))
    }
}

impl<T> std::ops::Deref for OnIo<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match &self.0 {
            Some(v) => v,
            // Taken only in `drop`.
            None => unreachable!("OnIo is emptied only when dropped"),
        }
    }
}

impl<T> Drop for OnIo<T> {
    fn drop(&mut self) {
        let _io = io_handle().enter();
        drop(self.0.take());
    }
}

/// Where the broker-side tasks run: set once, by [`run_io_on`] before the first
/// connection or by the first connection (the `verso-amqp` thread).
static IO: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();

/// The transport's I/O runtime was already chosen when [`run_io_on`] was called: a
/// connection was opened first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the AMQP I/O runtime was already chosen (a connection was opened first)")]
pub struct IoRuntimeChosen;

/// Runs every connection's tasks of this process on `handle`'s runtime instead of the
/// `verso-amqp` thread. Call it before the first connection.
///
/// For a process whose runtime is one thread (`new_current_thread`): a request then
/// reaches its handler, and its reply the socket, without leaving that thread, where
/// with the `verso-amqp` thread each call wakes two threads twice (the I/O thread for the
/// delivery, the runtime for the handler, the I/O thread again for the reply). On a
/// multi-threaded runtime keep the default: amqprs's tasks would hand frames between
/// workers.
pub fn run_io_on(handle: tokio::runtime::Handle) -> Result<(), IoRuntimeChosen> {
    IO.set(handle).map_err(|_| IoRuntimeChosen)
}

/// The runtime of the broker-side tasks: one thread per process ("verso-amqp") runs
/// amqprs's tasks (each connection's reader and writer, each channel's dispatcher), the
/// reconnect supervisor and the consumer loops, whatever runtime the application uses
/// (unless the application chose its own runtime with [`run_io_on`]).
///
/// amqprs spawns its tasks on the runtime that opens the connection or the channel, and
/// passes every frame between them through channels: on one thread those hand-offs are
/// task switches, not cross-thread wake-ups. Application code (handlers, callers) never
/// runs here: requests reach the server's runtime through its listener channel and
/// replies reach callers through oneshots. amqprs requests are started here too, and
/// awaited from elsewhere: one cancelled halfway (a caller's timeout) would otherwise
/// leave its channel's dispatcher without the answer it expects.
pub(super) fn io_handle() -> &'static tokio::runtime::Handle {
    IO.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("verso-amqp".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match rt {
                    Ok(rt) => {
                        let _ = tx.send(Some(rt.handle().clone()));
                        rt.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot build the AMQP I/O runtime");
                        let _ = tx.send(None);
                    }
                }
            });
        match spawned.ok().and_then(|_| rx.recv().ok().flatten()) {
            Some(handle) => handle,
            // No thread or no runtime (out of resources): fall back to the caller's
            // runtime, which works, only with more cross-thread wake-ups.
            None => tokio::runtime::Handle::current(),
        }
    })
}

/// Runs `f` on the broker I/O runtime and awaits it from any runtime.
pub(super) async fn on_io_thread<T: Send + 'static>(
    f: impl std::future::Future<Output = Result<T, AmqpError>> + Send + 'static,
) -> Result<T, AmqpError> {
    io_handle().spawn(f).await.unwrap_or_else(|e| {
        Err(AmqpError::IoTask {
            detail: e.to_string(),
        })
    })
}
