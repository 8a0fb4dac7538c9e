//! The generic `verso` binary. It knows no application's objects, so it runs
//! `objects diff OLD NEW` (two lock files) and `upgrade status|finalize` (over RPC); an
//! application gets the other commands by
//! calling [`verso_cli::run`] from a binary of its own.

fn main() -> std::process::ExitCode {
    verso_cli::run_without_application(std::env::args_os())
}
