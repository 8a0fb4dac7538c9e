//! What `/proc` says about a process (CPU seconds, resident memory), for benchmark
//! figures.

/// CPU seconds (user plus system) `pid` has used, `None` when it cannot be read (gone):
/// its process CPU-time clock (`clock_getcpuclockid`), in nanoseconds and counting
/// threads that have exited. (`/proc/<pid>/stat`'s utime and stime come in 10 ms ticks:
/// a 5 s idle window read 0 or 2 ms/s, as much as 0.2 ms per heartbeat at 10 a second.)
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).ok().filter(|p| *p > 0)?);
    let clock = nix::time::clock_getcpuclockid(pid).ok()?;
    let t = nix::time::clock_gettime(clock).ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
}

/// Resident memory of `pid` in bytes (`VmRSS`).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_clock_counts_its_work_below_a_tick() {
        let me = std::process::id();
        let before = cpu_seconds(me).expect("this process's CPU clock");
        // About a millisecond of work: below /proc's 10 ms tick, seen by the clock.
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(2) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let used = cpu_seconds(me).expect("this process's CPU clock") - before;
        assert!(used > 0.001 && used < 1.0, "{used} s");
        assert!(rss_bytes(me).is_some_and(|b| b > 0));
        // A process that has exited (and been reaped) has no clock.
        let mut child = std::process::Command::new("true").spawn().expect("a child");
        let gone = child.id();
        child.wait().expect("the child exits");
        assert_eq!(cpu_seconds(gone), None);
    }
}
