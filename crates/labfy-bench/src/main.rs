//! `labfy-bench`: Labfy's benchmarks. Each prints figures — and, where one
//! exists, the ratio against a bare reference measured in the same run —
//! never an assertion; the figures and the command that produced them go to
//! `docs/PERFORMANCE.md`. Built beside the programs it measures
//! (`cargo build --release --bins`), it finds `labfy`, `labfy-server` and
//! `labfy-governor` in its own folder. Not part of the appliance: the
//! Debian package does not ship it, and `labfy` does not link it.

mod cases;
mod common;
mod confinement;
mod gateway;
mod governor;
mod import;
mod ipc;
mod mcp;
mod pdf;
mod runtime;
mod soak;
mod store;
mod up;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Labfy's benchmarks (figures for docs/PERFORMANCE.md).
#[derive(Parser)]
#[command(name = "labfy-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// SPECIMEN generation, store read models and HTTP throughput
    /// (secured route against a bare route, in the same run).
    Store(store::StoreBenchArgs),
    /// IPC round trip over a Unix socket (authenticated, typed) against a bare
    /// echo of the same bytes on a Unix socket, in the same run.
    Ipc(ipc::IpcBenchArgs),
    /// A real case's work over a SPECIMEN investigation: the extraction job
    /// against the bare extractors, the export against a raw copy of the
    /// database, the verification against `sha256sum -c` (SPEC C4, C5).
    Cases(cases::CasesBenchArgs),
    /// `labfy import` of mixed small files with extraction, against reading
    /// and hashing them (SPEC C2).
    Import(import::ImportBenchArgs),
    /// PDF text as `labfy import` reads it (poppler, confined) against bare
    /// `pdftotext`, and OCR seconds per page (SPEC A1).
    Pdf(pdf::PdfBenchArgs),
    /// `labfy up` on an existing data directory until every child is healthy
    /// and the UI answers.
    Up(up::UpBenchArgs),
    /// The confined server's read-route throughput with and without its
    /// seccomp filter, interleaved, in the same run.
    Confinement(confinement::ConfinementBenchArgs),
    /// The agent tool gateway: in-process overhead and HTTP `POST /calls` throughput.
    Gateway(gateway::GatewayBenchArgs),
    /// The Resource Governor: sampling cost, admission, GGUF header parse.
    Governor(governor::GovernorBenchArgs),
    /// One `tools/call` through `labfy mcp` on stdio against the same
    /// gateway call over HTTP, alternating, in the same run (SPEC L5).
    Mcp(mcp::McpBenchArgs),
    /// The agent runtime against a real llama-server: one round's overhead
    /// against the bare request, rounds and repairs per turn with and
    /// without `response_format`.
    Runtime(runtime::RuntimeBenchArgs),
    /// The whole appliance under load with faults (kill -9 of each child,
    /// a full scratch, memory pressure) for a bounded time: RSS, open
    /// descriptors, database size, reservations and egress's campaign slots
    /// over time; at the end every acknowledged write present, nothing
    /// left reserved, the database intact (non-zero exit otherwise).
    Soak(soak::SoakArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().what {
        What::Store(args) => store::store(args),
        What::Ipc(args) => ipc::ipc(args),
        What::Cases(args) => cases::cases(args),
        What::Import(args) => import::import(args),
        What::Pdf(args) => pdf::pdf(args),
        What::Up(args) => up::up(args),
        What::Confinement(args) => confinement::confinement(args),
        What::Gateway(args) => gateway::gateway(args),
        What::Governor(args) => governor::governor(args),
        What::Mcp(args) => mcp::mcp(args),
        What::Runtime(args) => runtime::runtime(args),
        What::Soak(args) => soak::soak(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("labfy-bench: error: {}", f.message());
            ExitCode::from(f.exit_code())
        }
    }
}
