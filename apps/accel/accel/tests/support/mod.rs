//! What the `accel` binary's process tests share: a child process killed when dropped,
//! and waiting for its first stdout line.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::Child;

/// A child process, killed and reaped when dropped (a failed test leaves none behind).
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for the first line of `child`'s stdout, which must start with `prefix` (the
/// process is ready), and returns it; the rest is read and dropped so the child never
/// blocks on a full pipe.
pub fn ready(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = lines.next().expect("a line").expect("text");
    assert!(line.starts_with(prefix), "{line}");
    std::thread::spawn(move || for _ in lines {});
    line
}
