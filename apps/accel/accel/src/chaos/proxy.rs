//! A TCP proxy the campaign puts between the components and a service (the broker, the
//! database), to cut every connection through it at once or freeze them (bytes stop
//! flowing both ways, connections stay open: a partition as TCP sees it).

use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; dropping it stops accepting (open connections end with their peers).
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    /// Bumped to cut every open connection.
    cuts: watch::Sender<u64>,
    /// While true, no byte is forwarded.
    frozen: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cuts, _) = watch::channel(0u64);
        let (frozen, _) = watch::channel(false);
        let (cuts_tx, frozen_tx) = (cuts.clone(), frozen.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let cut = cuts_tx.subscribe();
                let frozen = frozen_tx.subscribe();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::select! {
                        () = pump(cr, sw, cut.clone(), frozen.clone()) => {}
                        () = pump(sr, cw, cut, frozen) => {}
                    }
                });
            }
        });
        Ok(Proxy {
            addr,
            cuts,
            frozen,
            accept,
        })
    }

    /// Where the components connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every connection open through the proxy (new ones are accepted).
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Stops (`true`) or resumes (`false`) forwarding on every connection.
    pub fn freeze(&self, on: bool) {
        self.frozen.send_replace(on);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// Copies `from` to `to` until either ends or the proxy cuts; holds bytes while frozen.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<u64>,
    mut frozen: watch::Receiver<bool>,
) {
    cut.mark_unchanged();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = cut.changed() => return,
        };
        tokio::select! {
            r = frozen.wait_for(|f| !*f) => if r.is_err() { return },
            _ = cut.changed() => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        match tokio::time::timeout(within, s.read_exact(&mut buf)).await {
            Ok(Ok(_)) => Some(buf.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn forwards_freezes_and_cuts() {
        let proxy = Proxy::start(echo_server().await).await.expect("proxy");
        let mut s = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(
            roundtrip(&mut s, Duration::from_secs(5)).await,
            Some(b"ping".to_vec())
        );
        proxy.freeze(true);
        assert_eq!(roundtrip(&mut s, Duration::from_millis(300)).await, None);
        proxy.freeze(false);
        // The held bytes arrive once thawed.
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut buf))
            .await
            .expect("thawed")
            .expect("read");
        assert_eq!(&buf, b"ping");
        proxy.cut();
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
            .await
            .expect("the cut connection ends");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        // New connections still work.
        let mut again = TcpStream::connect(proxy.addr()).await.expect("connect");
        assert_eq!(
            roundtrip(&mut again, Duration::from_secs(5)).await,
            Some(b"ping".to_vec())
        );
    }
}
