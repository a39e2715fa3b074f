//! Debian's document programs (SPEC A1), run on hostile files as confined
//! as the worker: poppler's `pdfinfo`, `pdftotext` and `pdftoppm`, and
//! Tesseract for OCR. Each runs in a child started like the worker (a
//! Labfy program started again with [`TOOL_ARG`], in its caller's jail or a
//! jail of its own: [`crate::run`]), which confines itself
//! ([`labfy_sys::worker::confine_tool`]: limits, Landlock with nothing
//! writable, a seccomp filter against sockets, signals and namespaces) and
//! then becomes the program, its document on standard input and its answer
//! on standard output. Only the programs and arguments of [`Tool`] can be
//! asked for: the caller names a variant, never a path or a flag.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use labfy_sys::worker::{WorkerLimits, confine_tool, inherited, onto_stdio};

/// First argument that makes a Labfy program a document tool.
pub const TOOL_ARG: &str = "__labfy-parse-tool";
/// Address space of a tool (Tesseract with two languages needs ~400 MiB).
pub const TOOL_MEMORY_BYTES: u64 = 2 << 30;
/// CPU time of one tool run, in seconds.
pub const TOOL_CPU_SECONDS: u64 = 60;
/// The long side of a page rendered for OCR, in pixels (an A4 page at
/// about 280 dpi, whatever size the PDF says the page is).
pub const OCR_PAGE_PIXELS: u32 = 3300;
/// Languages OCR reads, when their data is installed.
const OCR_LANGUAGES: [&str; 2] = ["fra", "eng"];
/// What a tool may read: the system's programs, libraries, their data, the
/// loader's cache and fontconfig's settings. Nothing else — its document
/// comes on a descriptor.
const READABLE: [&str; 7] = ["/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/fonts", "/etc/alternatives"];

/// A program and its arguments, chosen by the parser, never by the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// `pdftotext -raw -htmlmeta`: the document's information (title,
    /// author, subject, keywords, creator and producer programs, dates) as
    /// the head of an HTML page, then the text in the order it was drawn,
    /// pages separated by form feeds, in its `<pre>` — one program for both
    /// (`pdfinfo` beside it would cost a third of the time a small PDF
    /// takes).
    Pdf,
    /// `pdftoppm`: one page as a greyscale image for OCR.
    PdfPage(u32),
    /// `tesseract`: the text of an image, in these languages (`fra+eng`).
    Ocr(String),
}

impl Tool {
    /// The program's path.
    pub fn program(&self) -> &'static str {
        match self {
            Tool::Pdf => "/usr/bin/pdftotext",
            Tool::PdfPage(_) => "/usr/bin/pdftoppm",
            Tool::Ocr(_) => "/usr/bin/tesseract",
        }
    }

    /// The Debian package that has it, for the notes.
    pub fn package(&self) -> &'static str {
        match self {
            Tool::Ocr(_) => "tesseract-ocr",
            _ => "poppler-utils",
        }
    }

    /// Its arguments: standard input in, standard output out.
    fn argv(&self) -> Vec<String> {
        let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        match self {
            Tool::Pdf => v(&["-raw", "-htmlmeta", "-enc", "UTF-8", "-eol", "unix", "-", "-"]),
            Tool::PdfPage(n) => {
                let n = n.to_string();
                let px = OCR_PAGE_PIXELS.to_string();
                v(&["-f", &n, "-l", &n, "-scale-to", &px, "-gray", "-singlefile", "-"])
            }
            Tool::Ocr(langs) => v(&["stdin", "stdout", "-l", langs, "--psm", "3"]),
        }
    }

    /// The variant as one argument of the child's command line.
    pub fn to_arg(&self) -> String {
        match self {
            Tool::Pdf => "pdf".into(),
            Tool::PdfPage(n) => format!("pdftoppm:{n}"),
            Tool::Ocr(langs) => format!("tesseract:{langs}"),
        }
    }

    /// The variant back from [`Tool::to_arg`]; anything else is refused.
    pub fn from_arg(arg: &str) -> Option<Tool> {
        match arg.split_once(':') {
            None if arg == "pdf" => Some(Tool::Pdf),
            Some(("pdftoppm", n)) => n.parse().ok().filter(|n| *n >= 1).map(Tool::PdfPage),
            Some(("tesseract", langs)) if !langs.is_empty() && langs.split('+').all(|l| OCR_LANGUAGES.contains(&l)) => {
                Some(Tool::Ocr(langs.to_owned()))
            }
            _ => None,
        }
    }

    /// Whether the program is installed.
    pub fn installed(&self) -> bool {
        Path::new(self.program()).is_file()
    }
}

/// Where Tesseract's language data lies (`/usr/share/tesseract-ocr/5/tessdata`
/// on Debian 12).
fn tessdata() -> Option<PathBuf> {
    let base = Path::new("/usr/share/tesseract-ocr");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(base)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("tessdata")))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// The OCR tool for the languages installed (French and English, or one of
/// them), or `None` when Tesseract or both languages are missing.
pub fn ocr() -> Option<Tool> {
    let dir = tessdata()?;
    let langs: Vec<&str> =
        OCR_LANGUAGES.iter().copied().filter(|l| dir.join(format!("{l}.traineddata")).is_file()).collect();
    let tool = Tool::Ocr(langs.join("+"));
    (!langs.is_empty() && tool.installed()).then_some(tool)
}

/// The arguments a parent gives: `TOOL_ARG <input fd> <output fd> <tool>`.
pub fn args(input: RawFd, output: RawFd, tool: &Tool) -> Vec<String> {
    vec![TOOL_ARG.to_owned(), input.to_string(), output.to_string(), tool.to_arg()]
}

/// If this process was started as a tool (`argv[1]` is [`TOOL_ARG`]),
/// confines it and becomes the tool (or exits, saying why not); otherwise
/// returns. Call it first in `main`, beside
/// [`crate::worker::run_if_worker`] ([`crate::run_if_child`] calls both).
pub fn run_if_tool() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(TOOL_ARG) {
        return;
    }
    let e = run(&argv[2..]);
    eprintln!("labfy document tool: {e}");
    std::process::exit(126);
}

/// Confines this process and replaces it by the tool; returns only on a
/// failure.
fn run(args: &[String]) -> String {
    let [input, output, tool] = args else {
        return "expected <input fd> <output fd> <tool>".into();
    };
    let Some(tool) = Tool::from_arg(tool) else {
        return format!("no such tool: {tool}");
    };
    let (Ok(input), Ok(output)) = (input.parse::<RawFd>(), output.parse::<RawFd>()) else {
        return "bad descriptor".into();
    };
    let (input, output) = match (inherited(input), inherited(output)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return e.to_string(),
    };
    if let Err(e) = onto_stdio(&input, &output) {
        return format!("descriptors: {e}");
    }
    let readable: Vec<&Path> = READABLE.iter().map(Path::new).collect();
    if let Err(e) =
        confine_tool(WorkerLimits { memory_bytes: TOOL_MEMORY_BYTES, cpu_seconds: TOOL_CPU_SECONDS }, &readable)
    {
        return e.to_string();
    }
    let e = Command::new(tool.program()).args(tool.argv()).env_clear().env("OMP_THREAD_LIMIT", "1").exec();
    format!("{}: {e}", tool.program())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tools_named_here_can_be_asked_for() {
        for t in [Tool::Pdf, Tool::PdfPage(3), Tool::Ocr("fra+eng".into()), Tool::Ocr("eng".into())] {
            assert_eq!(Tool::from_arg(&t.to_arg()), Some(t));
        }
        for bad in [
            "sh",
            "pdftoppm:0",
            "pdftoppm:-1",
            "pdftoppm:x",
            "tesseract:",
            "tesseract:fra+../x",
            "tesseract:deu",
            "/usr/bin/pdftotext",
            "pdfinfo",
            "pdftotext",
        ] {
            assert_eq!(Tool::from_arg(bad), None, "{bad}");
        }
    }
}
