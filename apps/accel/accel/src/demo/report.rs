//! The demo's timeline and report: one line per step, the checks each made with the
//! figure that proves it, progress bars on the long phases, and the closing tables.
//! `--json` writes the same [`Report`].

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::fmt::Display;
use std::time::Instant;

/// One check: what was verified and the figure that proves it.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// The step it belongs to.
    pub step: u32,
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// The figure: what was found (and expected, when it differs).
    pub evidence: String,
}

/// One step of the scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// 1 to 9.
    pub number: u32,
    /// What the step does.
    pub title: String,
    /// Milliseconds it took.
    pub millis: u128,
    /// Notes printed under the step (an object before and after its backport, ...).
    pub notes: Vec<String>,
}

/// A component's versions at the end.
#[derive(Clone, Debug, Serialize)]
pub struct Component {
    /// `conductor` or `agent`.
    pub component: String,
    /// Its id (the agent's host).
    pub id: String,
    /// Software version (what the code can do).
    pub software: u32,
    /// Apparent version (what it acts as).
    pub apparent: u32,
    /// `finalized`, `pre-finalized`, ...
    pub state: String,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// True only if every check passed.
    pub passed: bool,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
    /// Agents in the deployment.
    pub agents: u32,
    /// The transport (password masked).
    pub transport: String,
    /// The database (password masked).
    pub database: String,
    /// What release N is: `cyborg-17-in-rust` (accel's Cyborg 17 services) or `cyborg-17`
    /// (OpenStack Cyborg 17's own).
    pub release_n: String,
    /// Seconds from start to end.
    pub seconds: f64,
    /// The steps in order.
    pub steps: Vec<Step>,
    /// Every check, in order.
    pub checks: Vec<Check>,
    /// Every component's versions at the end.
    pub components: Vec<Component>,
}

/// A failed check: the scenario stops at the first (later steps build on it).
#[derive(Debug, thiserror::Error)]
#[error("step {step}: {name}: {evidence}")]
pub struct CheckFailed {
    /// The step.
    pub step: u32,
    /// The check.
    pub name: String,
    /// What was found.
    pub evidence: String,
}

/// Records the scenario as it runs and prints it for a person (unless quiet).
pub struct Timeline {
    started: Instant,
    step_started: Instant,
    quiet: bool,
    /// How many steps the scenario has (shown as `[k/n]`).
    steps_total: u32,
    report: Report,
}

impl Timeline {
    /// A timeline printing to stdout unless `quiet` (then only the report is written).
    pub fn new(agents: u32, transport: String, database: String, quiet: bool) -> Timeline {
        Timeline {
            started: Instant::now(),
            step_started: Instant::now(),
            quiet,
            steps_total: 9,
            report: Report {
                passed: false,
                error: None,
                agents,
                transport,
                database,
                release_n: "cyborg-17-in-rust".into(),
                seconds: 0.0,
                steps: Vec::new(),
                checks: Vec::new(),
                components: Vec::new(),
            },
        }
    }

    fn step_number(&self) -> u32 {
        self.report.steps.last().map_or(0, |s| s.number)
    }

    fn close_step(&mut self) {
        let millis = self.step_started.elapsed().as_millis();
        if let Some(last) = self.report.steps.last_mut() {
            last.millis = millis;
        }
    }

    /// Release N is OpenStack Cyborg 17 in Rust (`accel demo`).
    pub fn release_n_is_cyborg_in_rust(&mut self) {
        self.report.release_n = "cyborg-17-in-rust".into();
    }

    /// Release N is OpenStack Cyborg 17's own (`accel demo --from cyborg`).
    pub fn release_n_is_cyborg(&mut self) {
        self.report.release_n = "cyborg-17".into();
    }

    /// How many steps the scenario has (9 unless told).
    pub fn steps_total(&mut self, n: u32) {
        self.steps_total = n;
    }

    /// Starts step `number`.
    pub fn step(&mut self, number: u32, title: impl Into<String>) {
        self.close_step();
        let title = title.into();
        if !self.quiet {
            println!(
                "\n[{number}/{}] {title}  (t+{:.1}s)",
                self.steps_total,
                self.started.elapsed().as_secs_f64()
            );
        }
        self.step_started = Instant::now();
        self.report.steps.push(Step {
            number,
            title,
            millis: 0,
            notes: Vec::new(),
        });
    }

    /// A note under the current step.
    pub fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !self.quiet {
            for line in text.lines() {
                println!("      {line}");
            }
        }
        if let Some(last) = self.report.steps.last_mut() {
            last.notes.push(text);
        }
    }

    /// Records a check; a failed one stops the scenario.
    pub fn check(
        &mut self,
        name: impl Into<String>,
        passed: bool,
        evidence: impl Into<String>,
    ) -> Result<(), CheckFailed> {
        let (name, evidence) = (name.into(), evidence.into());
        let step = self.step_number();
        if !self.quiet {
            let mark = if passed { "ok  " } else { "FAIL" };
            println!("  {mark} {name}: {evidence}");
        }
        self.report.checks.push(Check {
            step,
            name: name.clone(),
            passed,
            evidence: evidence.clone(),
        });
        if passed {
            Ok(())
        } else {
            Err(CheckFailed {
                step,
                name,
                evidence,
            })
        }
    }

    /// Checks `found == expected`, the evidence naming both.
    pub fn expect_eq<T: PartialEq + Display>(
        &mut self,
        name: impl Into<String>,
        found: T,
        expected: T,
    ) -> Result<(), CheckFailed> {
        let evidence = if found == expected {
            found.to_string()
        } else {
            format!("{found} (expected {expected})")
        };
        self.check(name, found == expected, evidence)
    }

    /// A progress bar of `len` units for a long phase (hidden when quiet).
    pub fn bar(&self, len: u64, message: impl Into<String>) -> ProgressBar {
        let bar = if self.quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stdout())
        };
        bar.set_style(
            ProgressStyle::with_template("      {msg:<34} [{bar:24}] {pos}/{len} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(message.into());
        bar
    }

    /// Ends a progress bar, leaving its last line.
    pub fn finish_bar(&self, bar: ProgressBar, message: impl Into<String>) {
        bar.finish_with_message(message.into());
        if !bar.is_hidden() {
            // The finished bar stays as a line of the timeline.
            println!();
        }
    }

    /// Records the components' versions.
    pub fn components(&mut self, components: Vec<Component>) {
        self.report.components = components;
    }

    /// Ends the run: the closing tables (unless quiet) and the report.
    pub fn finish(mut self, error: Option<String>) -> Report {
        self.close_step();
        self.report.seconds = self.started.elapsed().as_secs_f64();
        self.report.passed = error.is_none() && self.report.checks.iter().all(|c| c.passed);
        self.report.error = error;
        if !self.quiet {
            print_tables(&self.report);
        }
        self.report
    }
}

fn print_tables(r: &Report) {
    println!("\nComponents");
    println!(
        "  {:<10} {:<10} {:>8} {:>8}  state",
        "component", "id", "software", "apparent"
    );
    for c in &r.components {
        println!(
            "  {:<10} {:<10} {:>8} {:>8}  {}",
            c.component, c.id, c.software, c.apparent, c.state
        );
    }
    let passed = r.checks.iter().filter(|c| c.passed).count();
    println!("\nChecks ({passed}/{} passed)", r.checks.len());
    for c in &r.checks {
        let mark = if c.passed { "ok  " } else { "FAIL" };
        println!("  {mark} [{}] {}", c.step, c.name);
    }
    match &r.error {
        None if r.passed => println!(
            "\nrolling upgrade {} with {} agents: every check passed in {:.1}s",
            match r.release_n.as_str() {
                "cyborg-17" => "OpenStack Cyborg 17 -> accel N+1",
                _ => "N (OpenStack Cyborg 17, in Rust) -> N+1 (accel)",
            },
            r.agents,
            r.seconds
        ),
        None => println!("\nFAILED: a check did not pass"),
        Some(e) => println!("\nFAILED: {e}"),
    }
}
