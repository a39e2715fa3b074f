//! Archives as containers (SPEC I2): zip, tar, and tar or a single file
//! compressed with gzip, xz or zstd. Each member becomes a child document —
//! imported as evidence derived from its archive, its path inside kept —
//! and the archive's own text is the list of its members. Runs inside the
//! confined worker like every parser: the members are bytes in memory,
//! nothing is written anywhere (the store keeps them by hash).
//!
//! Bounded against bombs and tricks: at most [`crate::MAX_CHILDREN`]
//! members, at most [`MAX_ARCHIVE_BYTES`] inflated in all and no more than
//! [`MAX_ARCHIVE_RATIO`] times the archive's own size; a member whose name
//! climbs out (`..`), is absolute or holds a control character is left out
//! with its reason, as are links, devices and directories. What is left
//! out or cut is said in the notes. An archive inside an archive is read in
//! its turn by the import (its depth bounded there).

use std::io::{Cursor, Read};
use std::path::{Component, Path};

use crate::{Child, Format, MAX_CHILDREN, Parsed};

/// Most bytes all members of one archive inflate to.
pub const MAX_ARCHIVE_BYTES: u64 = 64 << 20;
/// Most an archive may inflate, as a multiple of its own size (a zip bomb
/// inflates thousands of times).
pub const MAX_ARCHIVE_RATIO: u64 = 200;

/// Most bytes the members of an archive of `input_len` bytes may inflate
/// to: [`MAX_ARCHIVE_RATIO`] times its size (1 MiB at least), never above
/// [`MAX_ARCHIVE_BYTES`]. The worker stops there; the parent checks the
/// reply against it again.
pub fn max_inflated(input_len: u64) -> u64 {
    MAX_ARCHIVE_BYTES.min(input_len.saturating_mul(MAX_ARCHIVE_RATIO).max(1 << 20))
}

/// The kinds of archive read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Zip,
    Tar,
    Gzip,
    Xz,
    Zstd,
}

impl Kind {
    fn mime(self) -> &'static str {
        match self {
            Kind::Zip => "application/zip",
            Kind::Tar => "application/x-tar",
            Kind::Gzip => "application/gzip",
            Kind::Xz => "application/x-xz",
            Kind::Zstd => "application/zstd",
        }
    }
}

fn is_tar(bytes: &[u8]) -> bool {
    bytes.get(257..262) == Some(b"ustar")
}

/// Whether `bytes` open with a tar header whose checksum holds (a V7 tar:
/// no `ustar` magic).
fn old_tar_header(bytes: &[u8]) -> bool {
    let Some(h) = bytes.get(..512) else { return false };
    let field = std::str::from_utf8(&h[148..156]).unwrap_or("").trim_matches(|c: char| c == '\0' || c == ' ');
    let Ok(stored) = u32::from_str_radix(field, 8) else { return false };
    let sum: u32 = h.iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { u32::from(*b) }).sum();
    h[0] != 0 && stored == sum
}

/// The archive `bytes` (the file `name`) are, by signature — or, for an old
/// tar without one, by its `.tar` name and a header whose checksum holds;
/// a zip that is an office document (`.docx`…) is not one.
pub(crate) fn kind(bytes: &[u8], name: &str) -> Option<Kind> {
    if bytes.starts_with(b"PK\x03\x04") {
        return (!crate::filename::is_office_name(name)).then_some(Kind::Zip);
    }
    if crate::filename::extension(name) == "tar" && old_tar_header(bytes) {
        return Some(Kind::Tar);
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Some(Kind::Gzip);
    }
    if bytes.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        return Some(Kind::Xz);
    }
    if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Some(Kind::Zstd);
    }
    is_tar(bytes).then_some(Kind::Tar)
}

/// What one archive may still inflate to, and what was left out.
struct Budget {
    left: u64,
    members: usize,
    cut: Option<String>,
    left_out: Vec<String>,
}

impl Budget {
    fn new(input_len: usize) -> Self {
        Budget { left: max_inflated(input_len as u64), members: 0, cut: None, left_out: Vec::new() }
    }

    /// One member: left out with its reason when its path is not one,
    /// counted, and taken while the member bound and the budget allow.
    fn member(&mut self, path: Result<String, String>, r: impl Read, p: &mut Parsed) {
        let path = match path {
            Ok(path) => path,
            Err(why) => {
                self.left_out.push(why);
                return;
            }
        };
        self.members += 1;
        if self.members > MAX_CHILDREN {
            return;
        }
        if let Some(data) = self.take(r, &path) {
            p.children.push(Child { name: path, bytes: data });
        }
    }

    /// Reads `r` within what is left; `None` (and the cut noted) past it.
    fn take(&mut self, r: impl Read, what: &str) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        match r.take(self.left + 1).read_to_end(&mut out) {
            Ok(n) if n as u64 > self.left => {
                self.cut = Some(format!(
                    "inflated size above {} bytes at {what} (a compression bomb?): the rest left out",
                    MAX_ARCHIVE_BYTES.min(self.left + out.len() as u64)
                ));
                self.left = 0;
                None
            }
            Ok(n) => {
                self.left -= n as u64;
                Some(out)
            }
            Err(e) => {
                self.cut = Some(format!("{what} unreadable: {e}"));
                None
            }
        }
    }
}

/// A member's path as kept: `/`-separated normal components only.
fn member_path(p: &Path) -> Result<String, String> {
    let shown = p.to_string_lossy();
    let mut parts = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("{shown}: climbs out of the archive (`..`)")),
            Component::RootDir | Component::Prefix(_) => return Err(format!("{shown}: an absolute path")),
        }
    }
    let path = parts.join("/");
    if path.is_empty() {
        return Err("a member without a name".into());
    }
    if path.chars().any(char::is_control) {
        return Err(format!("{}: control characters in its name", path.escape_debug()));
    }
    Ok(path)
}

/// Reads an archive; never fails (what cannot be read is said in the notes).
pub(crate) fn read(bytes: &[u8], name: &str, kind: Kind) -> Parsed {
    let mut p = Parsed::binary(kind.mime());
    p.format = Format::Archive;
    let mut budget = Budget::new(bytes.len());
    match kind {
        Kind::Zip => zip_members(bytes, &mut budget, &mut p),
        Kind::Tar => tar_members(bytes, &mut budget, &mut p),
        Kind::Gzip | Kind::Xz | Kind::Zstd => {
            let inner = match kind {
                Kind::Gzip => budget.take(flate2::read::MultiGzDecoder::new(bytes), "the compressed stream"),
                Kind::Xz => budget.take(liblzma::read::XzDecoder::new(bytes), "the compressed stream"),
                _ => match zstd::stream::read::Decoder::new(bytes) {
                    Ok(d) => budget.take(d, "the compressed stream"),
                    Err(e) => {
                        budget.cut = Some(format!("not a zstd stream: {e}"));
                        None
                    }
                },
            };
            if let Some(inner) = inner {
                if is_tar(&inner) {
                    p.mime = format!("application/x-tar+{}", kind.mime().rsplit('/').next().unwrap_or("compressed"));
                    // The members are parts of what was inflated: within it.
                    let mut again = Budget { left: inner.len() as u64, members: 0, cut: None, left_out: Vec::new() };
                    tar_members(&inner, &mut again, &mut p);
                    budget.cut = again.cut;
                    budget.left_out = again.left_out;
                    budget.members = again.members;
                } else {
                    // One compressed file: the child is that file.
                    let inner_name = Path::new(name)
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "contenu".into());
                    p.children.push(Child { name: inner_name, bytes: inner });
                    budget.members = 1;
                }
            }
        }
    }
    let listing: Vec<String> = p.children.iter().map(|c| format!("{} ({} bytes)", c.name, c.bytes.len())).collect();
    p.text = listing.join("\n");
    p.metadata.insert("members".into(), p.children.len().to_string());
    p.metadata.insert("inflated_bytes".into(), p.children.iter().map(|c| c.bytes.len()).sum::<usize>().to_string());
    if budget.members > MAX_CHILDREN {
        p.notes.push(format!("only the first {MAX_CHILDREN} of {} members were taken", budget.members));
    }
    if let Some(cut) = budget.cut {
        p.notes.push(cut);
    }
    if !budget.left_out.is_empty() {
        let n = budget.left_out.len();
        let shown: Vec<String> = budget.left_out.into_iter().take(5).collect();
        p.notes.push(format!("{n} members left out: {}", shown.join("; ")));
    }
    p
}

fn zip_members(bytes: &[u8], budget: &mut Budget, p: &mut Parsed) {
    let mut archive = match zip::ZipArchive::new(Cursor::new(bytes)) {
        Ok(a) => a,
        Err(e) => {
            budget.cut = Some(format!("not a readable zip archive: {e}"));
            return;
        }
    };
    for i in 0..archive.len() {
        if budget.cut.is_some() {
            return;
        }
        let mut file = match archive.by_index(i) {
            Ok(f) => f,
            Err(e) => {
                budget.left_out.push(format!("member {i}: {e}"));
                continue;
            }
        };
        if file.is_dir() {
            continue;
        }
        let raw = file.name().to_owned();
        if file.is_symlink() {
            budget.left_out.push(format!("{}: a symbolic link", raw.escape_debug()));
            continue;
        }
        // `enclosed_name` refuses what climbs out or is absolute.
        let path = file
            .enclosed_name()
            .ok_or_else(|| format!("{}: climbs out of the archive", raw.escape_debug()))
            .and_then(|p| member_path(&p));
        budget.member(path, &mut file, p);
    }
}

fn tar_members(bytes: &[u8], budget: &mut Budget, p: &mut Parsed) {
    let mut archive = tar::Archive::new(Cursor::new(bytes));
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            budget.cut = Some(format!("not a readable tar archive: {e}"));
            return;
        }
    };
    for entry in entries {
        if budget.cut.is_some() {
            return;
        }
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                budget.cut = Some(format!("the tar archive breaks off: {e}"));
                return;
            }
        };
        let kind = entry.header().entry_type();
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() || kind.is_gnu_longname()
        {
            continue;
        }
        if !kind.is_file() && !kind.is_contiguous() {
            let what = if kind.is_symlink() || kind.is_hard_link() { "a link" } else { "not a regular file" };
            budget.left_out.push(format!("{}: {what}", raw.escape_debug()));
            continue;
        }
        let path = entry.path().map_err(|e| format!("{}: {e}", raw.escape_debug())).and_then(|p| member_path(&p));
        budget.member(path, &mut entry, p);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    use crate::fixtures::{tar as tar_of, zip as zip_of};

    fn names(p: &Parsed) -> Vec<&str> {
        p.children.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn zip_tar_and_compressed_tars_give_their_members_with_their_paths() {
        let files: [(&str, &[u8]); 2] =
            [("dossier/note.txt", b"IBAN FR76 3000 6000 0112 3456 7890 189"), ("lisez-moi.txt", b"bonjour")];
        let zip = zip_of(&files);
        let p = crate::parse(&zip, "pieces.zip");
        assert_eq!((p.format, p.mime.as_str()), (Format::Archive, "application/zip"));
        assert_eq!(names(&p), ["dossier/note.txt", "lisez-moi.txt"]);
        assert!(p.text.contains("dossier/note.txt (38 bytes)"), "{}", p.text);
        let tar = tar_of(&files);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar).expect("gz");
        let tgz = gz.finish().expect("gz");
        let xz = {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            e.write_all(&tar).expect("xz");
            e.finish().expect("xz")
        };
        let zst = zstd::stream::encode_all(&tar[..], 3).expect("zstd");
        for (bytes, name, mime) in [
            (tar.clone(), "pieces.tar", "application/x-tar"),
            (tgz, "pieces.tar.gz", "application/x-tar+gzip"),
            (xz, "pieces.tar.xz", "application/x-tar+x-xz"),
            (zst, "pieces.tar.zst", "application/x-tar+zstd"),
        ] {
            let p = crate::parse(&bytes, name);
            assert_eq!((p.format, p.mime.as_str()), (Format::Archive, mime), "{name}");
            assert_eq!(names(&p), ["dossier/note.txt", "lisez-moi.txt"], "{name}");
            assert!(p.notes.is_empty(), "{name}: {:?}", p.notes);
        }
        // One compressed file: its child is that file.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"journal du serveur").expect("gz");
        let p = crate::parse(&gz.finish().expect("gz"), "serveur.log.gz");
        assert_eq!(names(&p), ["serveur.log"]);
    }

    #[test]
    fn a_bomb_a_climb_and_a_link_are_left_out_and_said() {
        // 64 MiB + of zeros in a few hundred KiB: cut at the bound.
        let zeros = vec![0u8; (MAX_ARCHIVE_BYTES + (1 << 20)) as usize];
        let bomb = zip_of(&[("zeros.bin", &zeros), ("after.txt", b"x")]);
        assert!(bomb.len() < 1 << 20);
        let p = crate::parse(&bomb, "bomb.zip");
        assert!(p.notes.iter().any(|n| n.contains("compression bomb")), "{:?}", p.notes);
        assert!(p.children.iter().map(|c| c.bytes.len()).sum::<usize>() as u64 <= MAX_ARCHIVE_BYTES);
        // A tar whose member climbs out, and a symbolic link.
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..13].copy_from_slice(b"../evasion.sh");
        h.set_size(2);
        h.set_cksum();
        b.append(&h, &b"hi"[..]).expect("append");
        let mut l = tar::Header::new_gnu();
        l.set_entry_type(tar::EntryType::Symlink);
        l.set_size(0);
        b.append_link(&mut l, "passwd", "/etc/passwd").expect("link");
        let mut ok = tar::Header::new_gnu();
        ok.set_size(3);
        ok.set_cksum();
        b.append_data(&mut ok, "bien.txt", &b"oui"[..]).expect("append");
        let p = crate::parse(&b.into_inner().expect("tar"), "piege.tar");
        assert_eq!(names(&p), ["bien.txt"], "{:?}", p.notes);
        let note = p.notes.join(" | ");
        assert!(
            note.contains("2 members left out") && note.contains("climbs out") && note.contains("a link"),
            "{note}"
        );
    }

    #[test]
    fn more_members_than_the_bound_are_counted_not_taken() {
        let many: Vec<(String, Vec<u8>)> =
            (0..MAX_CHILDREN + 4).map(|i| (format!("f{i}.txt"), vec![b'a'; 4])).collect();
        let refs: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
        let p = crate::parse(&tar_of(&refs), "many.tar");
        assert_eq!(p.children.len(), MAX_CHILDREN);
        assert!(
            p.notes.iter().any(|n| n.contains(&format!("{MAX_CHILDREN} of {} members", MAX_CHILDREN + 4))),
            "{:?}",
            p.notes
        );
    }
}
