//! `labfy-bench pdf`: PDF text the way Labfy reads it — poppler's
//! `pdftotext -raw -htmlmeta` in a confined child with a jail of its own
//! for each PDF (`labfy_parse::run::parse_jailed`; `labfy import` keeps one
//! jail for many, `labfy_parse::session`) — in pages per second, against bare `pdftotext -raw` on the same files in the same run,
//! and the built-in `pdf-extract` beside them; then OCR seconds per page of
//! the corpus's scan, confined against bare `pdftoppm | tesseract`
//! (SPEC A1, docs/PERFORMANCE.md).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use labfy::Failure;
use labfy_core::ErrorKind;

/// `labfy-bench pdf`.
#[derive(Args)]
pub struct PdfBenchArgs {
    /// The corpus folder.
    #[arg(long, default_value = "tests/fixtures/pdf-corpus")]
    corpus: PathBuf,
    /// Times each PDF is read by each reader.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Internal, format!("{what}: {e}"))
}

const BORN_DIGITAL: [&str; 5] = ["ghostscript-enscript", "ghostscript-groff", "pdftex", "chromium", "libreoffice"];

/// Pages of a PDF, as `pdfinfo` counts them.
fn pages(pdf: &Path) -> Result<u32, Failure> {
    let out = Command::new("pdfinfo").arg(pdf).output().map_err(|e| failed("pdfinfo", e))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Pages:").and_then(|n| n.trim().parse().ok()))
        .ok_or_else(|| failed("pdfinfo", format!("no page count for {}", pdf.display())))
}

/// Runs a shell pipeline with `input` on its standard input, output dropped.
fn bare(cmd: &str, input: &Path) -> Result<(), Failure> {
    let file = File::open(input).map_err(|e| failed("corpus", e))?;
    let st = Command::new("sh")
        .args(["-c", cmd])
        .stdin(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| failed(cmd, e))?;
    if !st.success() {
        return Err(failed(cmd, st));
    }
    Ok(())
}

fn confined(program: &Path, pdf: &Path) -> Result<labfy_parse::Parsed, Failure> {
    let file = File::open(pdf).map_err(|e| failed("corpus", e))?;
    let len = file.metadata().map_err(|e| failed("corpus", e))?.len();
    let name = pdf.file_name().and_then(|n| n.to_str()).unwrap_or("document.pdf");
    Ok(labfy_parse::run::parse_jailed(program, file, len, name, None, Duration::from_secs(120)))
}

/// Times each reader over the corpus and prints one line each.
pub fn pdf(args: PdfBenchArgs) -> Result<(), Failure> {
    let program = crate::common::sibling("labfy")?;
    let mut total_pages = 0u32;
    let (mut t_confined, mut t_bare, mut t_builtin) = (0f64, 0f64, 0f64);
    for name in BORN_DIGITAL {
        let pdf = args.corpus.join(format!("{name}.pdf"));
        let n = pages(&pdf)?;
        let bytes = std::fs::read(&pdf).map_err(|e| failed("corpus", e))?;
        for _ in 0..args.rounds {
            total_pages += n;
            let started = Instant::now();
            let p = confined(&program, &pdf)?;
            t_confined += started.elapsed().as_secs_f64();
            if p.text.is_empty() || !p.notes.is_empty() {
                return Err(failed(name, format!("not read whole: {:?}", p.notes)));
            }
            let started = Instant::now();
            bare("pdftotext -raw -enc UTF-8 - -", &pdf)?;
            t_bare += started.elapsed().as_secs_f64();
            let started = Instant::now();
            std::hint::black_box(labfy_parse::parse(&bytes, "document.pdf"));
            t_builtin += started.elapsed().as_secs_f64();
        }
    }
    let rate = |t: f64| f64::from(total_pages) / t;
    println!(
        "{:<44} {total_pages} pages in {t_confined:.2} s: {:.1} pages/s (confined/bare: {:.2}× the time)",
        "confined pdftotext, a jail a PDF",
        rate(t_confined),
        t_confined / t_bare
    );
    println!("{:<44} {total_pages} pages in {t_bare:.2} s: {:.1} pages/s", "bare pdftotext -raw", rate(t_bare));
    println!(
        "{:<44} {total_pages} pages in {t_builtin:.2} s: {:.1} pages/s (in process, unconfined)",
        "built-in pdf-extract",
        rate(t_builtin)
    );

    // OCR: the scan's pages.
    let scan = args.corpus.join("scan.pdf");
    let n = pages(&scan)?;
    let started = Instant::now();
    let p = confined(&program, &scan)?;
    let ocr = started.elapsed().as_secs_f64();
    if !p.metadata.contains_key("ocr_pages") {
        return Err(failed("scan.pdf", format!("not read by OCR: {:?}", p.notes)));
    }
    let started = Instant::now();
    for page in 1..=n {
        bare(
            &format!(
                "pdftoppm -f {page} -l {page} -scale-to {} -gray -singlefile - \
                 | OMP_THREAD_LIMIT=1 tesseract stdin stdout -l fra+eng --psm 3",
                labfy_parse::tool::OCR_PAGE_PIXELS
            ),
            &scan,
        )?;
    }
    let ocr_bare = started.elapsed().as_secs_f64();
    println!(
        "{:<44} {n} pages in {ocr:.2} s: {:.2} s/page (confined/bare: {:.2}× the time)",
        "confined OCR (pdftoppm + tesseract)",
        ocr / f64::from(n),
        ocr / ocr_bare
    );
    println!("{:<44} {n} pages in {ocr_bare:.2} s: {:.2} s/page", "bare pdftoppm | tesseract", ocr_bare / f64::from(n));
    Ok(())
}
