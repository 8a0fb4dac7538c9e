//! RPC calls in flight over a local RabbitMQ: 1, 8 and 64 calls outstanding at once, side
//! by side in one run, for verso, Python oslo.messaging and the bare amqprs floor.
//!
//! ```text
//! crates/verso-rpc/interop/start-rabbitmq.sh
//! cargo bench -p verso-rpc --bench amqp_inflight            # 5 rounds of 4000 calls per contender and level
//! VERSO_BENCH_CALLS=8000 VERSO_BENCH_ROUNDS=5 VERSO_BENCH_INFLIGHT=1,4,16,64 cargo bench -p verso-rpc --bench amqp_inflight
//! ```
//! Contenders, each at every level of calls in flight, in interleaved rounds (rotating
//! order; each round's ratios are printed, and their medians are the figures):
//! - `floor`: bare amqprs doing the broker work of that many concurrent oslo calls (topic
//!   exchange, oslo's properties, a real-size body, a reply queue), `K` requests
//!   outstanding, one published for each reply; in this process, on two connections;
//! - `verso`: verso client and server in this process on two connections, `K` tasks each
//!   making calls one after another on one `RpcClient`;
//! - `verso-2p`: the same with the server in a child process, as the Python pair runs;
//! - `python`: oslo.messaging client and server (interop/peer.py), `K` client threads in
//!   one client process against a server whose threading executor has at least `K`
//!   workers; `python-procs`: the same `K` threads spread over up to 4 client processes
//!   (`VERSO_BENCH_PY_PROCESSES`), in case the GIL holds the threads back.
//!
//! `VERSO_BENCH_ONLY=floor|verso|verso-2p|python|python-procs` runs one contender at the
//! first level of `VERSO_BENCH_INFLIGHT` (for `perf` and profilers).
//!
//! Targets (at the highest level): `verso-2p` at least 5x the better Python form, and the
//! floor at most 1.3x `verso`. With `VERSO_BENCH_OUT` set, writes `rpc-inflight.json`
//! (tools/bench-report's schema).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// The allocator the `accel` binary ships, so the figures are what a service gets (glibc's
/// malloc costs verso's path about a fifth more CPU at 64 calls in flight).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod amqp_common;
use amqp_common::{
    median, python_peers_inflight, rounds, serve_until_stdin_closes, url, BareAmqprs, VersoPair,
    SERVE_ENV,
};
use bench_report::{BenchResult, Better, Chart, Series, Table, Target};

const CONTENDERS: [&str; 5] = ["floor", "verso", "verso-2p", "python", "python-procs"];
/// Calls per measurement of the Python pair: it is 10-50x slower, and its figure settles
/// well within this many.
const PYTHON_CALLS: usize = 1500;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn levels() -> Vec<usize> {
    let text = std::env::var("VERSO_BENCH_INFLIGHT").unwrap_or_else(|_| "1,8,64".into());
    let mut v: Vec<usize> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("VERSO_BENCH_INFLIGHT={text}: numbers like 1,8,64"))
        })
        .filter(|&k| k > 0)
        .collect();
    v.sort_unstable();
    v.dedup();
    assert!(!v.is_empty(), "VERSO_BENCH_INFLIGHT={text}: no level");
    v
}

/// rate[contender][level] of one round; `None` where Python failed or was not run.
type Round = Vec<Vec<Option<f64>>>;

fn main() {
    if let Ok(topic) = std::env::var(SERVE_ENV) {
        return serve_until_stdin_closes(&topic);
    }
    let (n, rounds, levels) = (env_usize("VERSO_BENCH_CALLS", 4000), rounds(), levels());
    let py_procs = env_usize("VERSO_BENCH_PY_PROCESSES", 4).max(1);
    let started = bench_report::now_utc();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(which) = std::env::var("VERSO_BENCH_ONLY") {
        // One contender at the first level, for perf and profilers.
        let k = levels[0];
        let rate = rt.block_on(async {
            match which.as_str() {
                "floor" => BareAmqprs::new().await.round_trips_inflight(n, k).await,
                "verso" => VersoPair::new(true).await.calls_inflight(n, k).await,
                "verso-2p" => VersoPair::new(false).await.calls_inflight(n, k).await,
                "python" => python_peers_inflight(n, k, 1).expect("python peers"),
                "python-procs" => {
                    python_peers_inflight(n, k, py_procs.min(k)).expect("python peers")
                }
                other => {
                    panic!("VERSO_BENCH_ONLY={other}: floor|verso|verso-2p|python|python-procs")
                }
            }
        });
        println!("{which}: {rate:.0} calls/s ({n} calls, {k} in flight)");
        return;
    }
    let mut floor = rt.block_on(BareAmqprs::new());
    let ours = rt.block_on(VersoPair::new(true));
    let ours_2p = rt.block_on(VersoPair::new(false));
    println!(
        "calls in flight over RabbitMQ at {}: {rounds} interleaved rounds of {n} calls \
         ({} for Python) per contender and level (calls per second)",
        verso_rpc::transport::amqp::redact(&url()),
        n.min(PYTHON_CALLS)
    );
    println!(
        "  {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>12} | {:>11} {:>15}",
        "round",
        "inflight",
        "floor",
        "verso",
        "verso-2p",
        "python",
        "python-procs",
        "floor/verso",
        "verso-2p/python"
    );
    let mut all: Vec<Round> = Vec::new();
    for round in 1..=rounds {
        let mut r: Round = vec![vec![None; levels.len()]; CONTENDERS.len()];
        for (li, &k) in levels.iter().enumerate() {
            for j in 0..CONTENDERS.len() {
                let c = (round + li + j) % CONTENDERS.len();
                r[c][li] = match c {
                    0 => Some(rt.block_on(floor.round_trips_inflight(n, k))),
                    1 => Some(rt.block_on(ours.calls_inflight(n, k))),
                    2 => Some(rt.block_on(ours_2p.calls_inflight(n, k))),
                    3 => python_peers_inflight(n.min(PYTHON_CALLS), k, 1),
                    // One client process is the same as `python`.
                    _ if k == 1 || py_procs == 1 => None,
                    _ => python_peers_inflight(n.min(PYTHON_CALLS), k, py_procs.min(k)),
                };
            }
            let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => format!("{:.2}", a / b),
                _ => "-".into(),
            };
            println!(
                "  {round:>5} {k:>8} {:>8} {:>8} {:>8} {:>8} {:>12} | {:>11} {:>15}",
                cell(r[0][li]),
                cell(r[1][li]),
                cell(r[2][li]),
                cell(r[3][li]),
                cell(r[4][li]),
                ratio(r[0][li], r[1][li]),
                ratio(r[2][li], best_python(&r, li)),
            );
        }
        all.push(r);
    }
    let result = summarize(&all, &levels, n, rounds, started);
    for t in &result.targets {
        println!(
            "  {}: {:.2}{} (target {} {:.2}{}): {}",
            t.name,
            t.value,
            t.unit,
            if t.better == Better::Higher {
                ">="
            } else {
                "<="
            },
            t.limit,
            t.unit,
            if t.met { "met" } else { "NOT MET" }
        );
    }
    match result.write_if_asked() {
        Ok(Some(path)) => println!("  wrote {}", path.display()),
        Ok(None) => {}
        Err(e) => eprintln!("amqp_inflight: {e}"),
    }
    rt.block_on(ours.stop());
    rt.block_on(ours_2p.stop());
    // amqprs closes a connection it drops with tokio::spawn: drop it inside the runtime.
    rt.block_on(async move { drop(floor) });
}

/// The better of the two Python forms in a round at level `li`.
fn best_python(r: &Round, li: usize) -> Option<f64> {
    match (r[3][li], r[4][li]) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn med(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| median(v))
}

fn summarize(
    all: &[Round],
    levels: &[usize],
    n: usize,
    rounds: usize,
    started: String,
) -> BenchResult {
    let rate = |c: usize, li: usize| med(all.iter().filter_map(|r| r[c][li]).collect());
    let ratio = |li: usize, f: &dyn Fn(&Round) -> Option<f64>| {
        med(all.iter().filter_map(f).collect::<Vec<_>>()).map(|v| (v, li))
    };
    let mut result = BenchResult::new(
        "rpc-inflight",
        "RPC calls in flight over RabbitMQ: verso, oslo.messaging and the bare amqprs floor",
        format!(
            "VERSO_BENCH_CALLS={n} VERSO_BENCH_ROUNDS={rounds} VERSO_BENCH_INFLIGHT={} \
             cargo bench -p verso-rpc --bench amqp_inflight",
            levels
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    );
    result.started = started;
    let series = (0..CONTENDERS.len())
        .map(|c| Series {
            label: CONTENDERS[c].into(),
            points: levels
                .iter()
                .enumerate()
                .filter_map(|(li, &k)| rate(c, li).map(|v| [k as f64, v]))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    result.charts.push(Chart {
        id: "throughput".into(),
        title: "calls per second by calls in flight (median of the rounds)".into(),
        x_label: "calls in flight".into(),
        y_label: "calls/s".into(),
        log_x: true,
        log_y: true,
        series,
    });
    let fmt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let mut rows = Vec::new();
    for (li, &k) in levels.iter().enumerate() {
        let mut row = vec![k.to_string()];
        row.extend((0..CONTENDERS.len()).map(|c| fmt(rate(c, li), 0)));
        row.push(fmt(
            ratio(li, &|r| Some(r[0][li]? / r[1][li]?)).map(|x| x.0),
            2,
        ));
        row.push(fmt(
            ratio(li, &|r| Some(r[1][li]? / best_python(r, li)?)).map(|x| x.0),
            2,
        ));
        row.push(fmt(
            ratio(li, &|r| Some(r[2][li]? / best_python(r, li)?)).map(|x| x.0),
            2,
        ));
        rows.push(row);
    }
    let mut columns: Vec<String> = vec!["in flight".into()];
    columns.extend(CONTENDERS.iter().map(|c| format!("{c} calls/s")));
    columns.extend(["floor / verso", "verso / python", "verso-2p / python"].map(String::from));
    result.tables.push(Table {
        title: "median of the rounds (ratios: median of each round's ratio; python: the better \
                of the two Python forms)"
            .into(),
        columns,
        rows,
    });
    let top = levels.len() - 1;
    let k = levels[top];
    if let Some((v, _)) = ratio(top, &|r| Some(r[2][top]? / best_python(r, top)?)) {
        result.targets.push(Target::new(
            format!("verso-2p / oslo.messaging at {k} in flight"),
            v,
            5.0,
            "x",
            Better::Higher,
        ));
    }
    if let Some((v, _)) = ratio(top, &|r| Some(r[0][top]? / r[1][top]?)) {
        result.targets.push(Target::new(
            format!("floor / verso at {k} in flight"),
            v,
            1.3,
            "x",
            Better::Lower,
        ));
    }
    let at = |c: usize| fmt(rate(c, top), 0);
    result.summary = format!(
        "Throughput of `ping` calls with 1 to {k} calls outstanding over the local RabbitMQ. \
         At {k} in flight: the bare amqprs floor {} calls/s, verso {} (client and server in \
         one process) and {} (server in its own process), oslo.messaging {} with {k} client \
         threads in one process and {} with them spread over processes. The floor is the \
         broker work alone; verso adds the envelope, the request context, dispatch and the \
         reply routing by message id.",
        at(0),
        at(1),
        at(2),
        at(3),
        at(4)
    );
    result
}
