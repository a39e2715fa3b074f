//! SPECIMEN generation with a progress bar (`labfy specimen`, `labfy up`
//! on a fresh data directory, and the benchmarks).

use std::io::IsTerminal;
use std::time::Instant;

use labfy_store::Store;
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};

use crate::Failure;

/// Runs the generator with a progress bar on a terminal (items, rate, time
/// left) and a one-line summary otherwise.
pub fn generate_with_progress(store: &mut Store, spec: SpecimenSpec) -> Result<SpecimenOutcome, Failure> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(spec.size);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "SPECIMEN {bar:40} {human_pos}/{human_len} pièces · {per_sec} · reste {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let started = Instant::now();
    let outcome = specimen::generate(store, spec, &mut |done, _total| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let outcome = outcome?;
    if let SpecimenOutcome::Created { replaced_incomplete, .. } = &outcome {
        if *replaced_incomplete {
            eprintln!("labfy: an interrupted SPECIMEN with seed {} was cleared and written again", spec.seed);
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "labfy: SPECIMEN written: {} evidence items, seed {}, in {secs:.1} s ({:.0} items/s)",
            spec.size,
            spec.seed,
            spec.size as f64 / secs.max(1e-9)
        );
    }
    Ok(outcome)
}
