//! The bounded GGUF reader: header, metadata, tensor infos; never tensor
//! data. Every length read from the file is checked against a named bound
//! and against the bytes left in the file *before* anything is allocated or
//! skipped, so a lying header costs at most a few small reads.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::ggml_type::{SizeError, ggml_type, tensor_bytes};
use super::{
    DEFAULT_ALIGNMENT, GgufError, MAX_ARRAY_NESTING, MAX_BLOCK_COUNT, MAX_HEADER_BYTES, MAX_KEY_BYTES, MAX_KV_COUNT,
    MAX_STRING_BYTES, MAX_TENSOR_COUNT, MAX_TENSOR_DIMS, MAX_TENSOR_NAME_BYTES, TensorInfo,
};

/// The four bytes every GGUF file starts with.
pub(super) const MAGIC: [u8; 4] = *b"GGUF";

/// GGUF value type ids (`enum gguf_type` in ggml's `gguf.h`).
pub(super) mod vt {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// The size of a fixed-size GGUF value, `None` for strings, arrays and
/// unknown types.
fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        vt::U8 | vt::I8 | vt::BOOL => Some(1),
        vt::U16 | vt::I16 => Some(2),
        vt::U32 | vt::I32 | vt::F32 => Some(4),
        vt::U64 | vt::I64 | vt::F64 => Some(8),
        _ => None,
    }
}

/// The fewest bytes one value of type `ty` can take in a file: what an
/// array length is checked against.
fn min_value_bytes(ty: u32) -> u64 {
    match ty {
        // A string is at least its u64 length; an array its u32 type and
        // u64 length.
        vt::STRING => 8,
        vt::ARRAY => 12,
        other => fixed_size(other).unwrap_or(1),
    }
}

/// The fewest bytes a metadata KV takes: a u64 key length, a one-byte key
/// (keys may not be empty), a u32 type, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// The fewest bytes a tensor info takes: a u64 name length, an empty name,
/// a u32 dimension count of 0, a u32 type, a u64 offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// Numeric and boolean arrays of the keys the estimate reads are kept when
/// they have at most this many elements: per-layer values, one per block.
const MAX_KEPT_ARRAY: u64 = MAX_BLOCK_COUNT as u64;
/// At most this many metadata keys look like one the estimate reads
/// (`<arch>.block_count`, …). A real file has about ten.
pub(super) const MAX_KEPT_KEYS: usize = 1024;
/// The buffer of the reader: large enough that skipping the tokenizer's
/// strings (a length, a short seek within the buffer) makes few syscalls.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The suffixes (after `<arch>`) of the keys the estimate reads.
pub(super) const ARCH_KEYS: &[&str] = &[
    ".block_count",
    ".embedding_length",
    ".context_length",
    ".feed_forward_length",
    ".attention.head_count",
    ".attention.head_count_kv",
    ".attention.key_length",
    ".attention.value_length",
    ".attention.sliding_window",
    ".attention.sliding_window_pattern",
];
/// `general.architecture`.
pub(super) const KEY_ARCHITECTURE: &str = "general.architecture";
/// `general.alignment` (a u32, a power of two).
pub(super) const KEY_ALIGNMENT: &str = "general.alignment";
/// The tokenizer's token list: its length is the vocabulary size.
pub(super) const KEY_TOKENS: &str = "tokenizer.ggml.tokens";

/// A metadata value the reader kept.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Meta {
    /// An integer of any GGUF integer type.
    Int(i128),
    /// A float (f32 or f64).
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    Str(String),
    /// A short array of integers or bools (bools as 0/1).
    Array(Vec<i128>),
    /// An array not kept: its element type and length.
    Skipped {
        /// Element type id.
        elem: u32,
        /// Element count.
        len: u64,
    },
}

/// What the metadata pass hands to the header assembly.
pub(super) struct Parsed {
    pub version: u32,
    pub kv_count: u64,
    pub kept: HashMap<String, Meta>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_data_offset: u64,
    pub alignment: u64,
    pub file_size: u64,
}

/// Opens `path` for reading without blocking (a FIFO would block a plain
/// open) and refuses anything but a regular file.
fn open_regular(path: &Path) -> Result<(File, u64), GgufError> {
    let io_err = |source| GgufError::Io { path: path.to_path_buf(), source };
    // Refuse early, before open, what is plainly not a file (a directory, a
    // device): opening a tape or a FIFO can have effects of its own.
    let meta = std::fs::metadata(path).map_err(io_err)?;
    if !meta.file_type().is_file() {
        return Err(GgufError::NotRegularFile { path: path.to_path_buf() });
    }
    // O_NONBLOCK: if the path was swapped for a FIFO since, open does not
    // wait for a writer; on a regular file it changes nothing.
    let file = File::options().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.file_type().is_file() {
        return Err(GgufError::NotRegularFile { path: path.to_path_buf() });
    }
    Ok((file, meta.len()))
}

/// Reads and checks the header of the GGUF file at `path`.
pub(super) fn parse(path: &Path) -> Result<Parsed, GgufError> {
    let (file, file_size) = open_regular(path)?;
    let mut r = Reader { inner: BufReader::with_capacity(READ_BUFFER_BYTES, file), pos: 0, size: file_size };
    r.parse().map_err(|e| match e {
        GgufError::Io { source, .. } => GgufError::Io { path: path.to_path_buf(), source },
        other => other,
    })
}

/// Reads and checks a header held in memory, the start of a file of
/// `file_size` bytes (at least `bytes.len()`): what [`parse`] does, without
/// a file (fuzzing, tests). Reading past `bytes` is an I/O error.
pub(super) fn parse_bytes(bytes: &[u8], file_size: u64) -> Result<Parsed, GgufError> {
    let size = file_size.max(bytes.len() as u64);
    let mut r = Reader { inner: BufReader::with_capacity(READ_BUFFER_BYTES, io::Cursor::new(bytes)), pos: 0, size };
    r.parse()
}

/// A position-tracking reader over the file, checking every read against
/// the file's size and the header budget.
struct Reader<R> {
    inner: BufReader<R>,
    pos: u64,
    size: u64,
}

impl<R: Read + io::Seek> Reader<R> {
    /// Makes sure `n` more bytes exist (in the file, within the header
    /// budget) before reading or skipping them.
    fn need(&self, n: u64, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        let end = self.pos.checked_add(n).ok_or_else(|| GgufError::Lies(format!("{} overflows u64", what())))?;
        if end > self.size {
            return Err(GgufError::Truncated { what: what(), needed: end, file_size: self.size });
        }
        if end > MAX_HEADER_BYTES {
            return Err(GgufError::TooLarge {
                what: "GGUF header (metadata and tensor infos)",
                value: end,
                max: MAX_HEADER_BYTES,
            });
        }
        Ok(())
    }

    /// The bytes left in the file, capped by the header budget.
    fn left(&self) -> u64 {
        self.size.min(MAX_HEADER_BYTES).saturating_sub(self.pos)
    }

    fn bytes<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        self.need(N as u64, what)?;
        let mut buf = [0u8; N];
        self.read_into(&mut buf, what)?;
        Ok(buf)
    }

    fn read_into(&mut self, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<(), GgufError> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.pos += buf.len() as u64;
                Ok(())
            }
            // The file shrank while being read.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(GgufError::Truncated { what: what(), needed: self.pos + buf.len() as u64, file_size: self.size })
            }
            Err(source) => Err(GgufError::Io { path: Default::default(), source }),
        }
    }

    /// Skips `n` bytes (checked by `need` first).
    fn skip(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        self.need(n, what)?;
        let delta = i64::try_from(n).map_err(|_| GgufError::Lies(format!("{} is too long to skip", what())))?;
        self.inner.seek_relative(delta).map_err(|source| GgufError::Io { path: Default::default(), source })?;
        self.pos += n;
        Ok(())
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    /// A string's length, checked against `max` and the bytes left.
    fn string_len(&mut self, max: u64, bound: &'static str, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        let len = self.u64(what)?;
        if len > max {
            return Err(GgufError::TooLarge { what: bound, value: len, max });
        }
        self.need(len, what)?;
        Ok(len)
    }

    fn string(&mut self, max: u64, bound: &'static str, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let len = self.string_len(max, bound, what)?;
        // Bounded by `max` and by the bytes the file holds.
        let mut buf = vec![0u8; len as usize];
        self.read_into(&mut buf, what)?;
        String::from_utf8(buf).map_err(|_| GgufError::Malformed(format!("{} is not UTF-8", what())))
    }

    fn skip_string(&mut self, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        let len = self.string_len(MAX_STRING_BYTES, "metadata string", what)?;
        self.skip(len, what)
    }

    /// Checks that an array of `len` values of type `elem` can fit in the
    /// bytes left (an absurd length is a lie, found before any work).
    fn check_array_len(&self, elem: u32, len: u64, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        let least = len.saturating_mul(min_value_bytes(elem));
        if least > self.left() {
            return Err(GgufError::Lies(format!(
                "{} claims {len} elements (at least {least} bytes) but only {} bytes are left",
                what(),
                self.left()
            )));
        }
        Ok(())
    }

    /// Reads an array header (element type, length) and checks both.
    fn array_header(&mut self, depth: u32, what: &dyn Fn() -> String) -> Result<(u32, u64), GgufError> {
        if depth > MAX_ARRAY_NESTING {
            return Err(GgufError::TooLarge {
                what: "array nesting depth",
                value: u64::from(depth),
                max: u64::from(MAX_ARRAY_NESTING),
            });
        }
        let elem = self.u32(what)?;
        check_type(elem, what)?;
        let len = self.u64(what)?;
        self.check_array_len(elem, len, what)?;
        Ok((elem, len))
    }

    /// Skips one value of type `ty` (strings and arrays without collecting
    /// them; fixed-size arrays in one seek).
    fn skip_value(&mut self, ty: u32, depth: u32, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        match ty {
            vt::STRING => self.skip_string(what),
            vt::ARRAY => {
                let (elem, len) = self.array_header(depth + 1, what)?;
                self.skip_array(elem, len, depth + 1, what)
            }
            other => match fixed_size(other) {
                Some(n) => self.skip(n, what),
                None => Err(GgufError::Malformed(format!("{} has unknown value type {other}", what()))),
            },
        }
    }

    fn skip_array(&mut self, elem: u32, len: u64, depth: u32, what: &dyn Fn() -> String) -> Result<(), GgufError> {
        if let Some(n) = fixed_size(elem) {
            // check_array_len made sure len * n fits in the bytes left.
            return self.skip(len * n, what);
        }
        for _ in 0..len {
            if elem == vt::STRING && self.skip_buffered_string() {
                continue;
            }
            self.skip_value(elem, depth, what)?;
        }
        Ok(())
    }

    /// Skips a string lying whole in the read buffer (the common case of a
    /// tokenizer's short tokens): one look at the buffer, no syscall. Returns
    /// `false`, having consumed nothing, when the string is not whole in the
    /// buffer or breaks a bound: the checked path then reads it.
    fn skip_buffered_string(&mut self) -> bool {
        let limit = self.size.min(MAX_HEADER_BYTES);
        let buf = self.inner.buffer();
        let Some(len_bytes) = buf.get(..8) else { return false };
        let mut le = [0u8; 8];
        le.copy_from_slice(len_bytes);
        let len = u64::from_le_bytes(le);
        // The bound first: a length near 2^64 would overflow the sum.
        if len > MAX_STRING_BYTES {
            return false;
        }
        let whole = 8 + len;
        if whole > buf.len() as u64 || self.pos.saturating_add(whole) > limit {
            return false;
        }
        self.inner.consume(whole as usize);
        self.pos += whole;
        true
    }

    /// Reads one fixed-size scalar.
    fn scalar(&mut self, ty: u32, what: &dyn Fn() -> String) -> Result<Meta, GgufError> {
        Ok(match ty {
            vt::U8 => Meta::Int(i128::from(self.bytes::<1>(what)?[0])),
            vt::I8 => Meta::Int(i128::from(i8::from_le_bytes(self.bytes(what)?))),
            vt::U16 => Meta::Int(i128::from(u16::from_le_bytes(self.bytes(what)?))),
            vt::I16 => Meta::Int(i128::from(i16::from_le_bytes(self.bytes(what)?))),
            vt::U32 => Meta::Int(i128::from(u32::from_le_bytes(self.bytes(what)?))),
            vt::I32 => Meta::Int(i128::from(i32::from_le_bytes(self.bytes(what)?))),
            vt::U64 => Meta::Int(i128::from(u64::from_le_bytes(self.bytes(what)?))),
            vt::I64 => Meta::Int(i128::from(i64::from_le_bytes(self.bytes(what)?))),
            vt::F32 => Meta::Float(f64::from(f32::from_le_bytes(self.bytes(what)?))),
            vt::F64 => Meta::Float(f64::from_le_bytes(self.bytes(what)?)),
            vt::BOOL => match self.bytes::<1>(what)?[0] {
                0 => Meta::Bool(false),
                1 => Meta::Bool(true),
                b => return Err(GgufError::Malformed(format!("{} is a bool of value {b}", what()))),
            },
            other => return Err(GgufError::Malformed(format!("{} has unknown value type {other}", what()))),
        })
    }

    /// Reads the value of a key the estimate uses: scalars and strings are
    /// kept, short numeric or bool arrays too, anything else is skipped and
    /// only its shape kept.
    fn kept_value(&mut self, ty: u32, what: &dyn Fn() -> String) -> Result<Meta, GgufError> {
        match ty {
            vt::STRING => Ok(Meta::Str(self.string(MAX_STRING_BYTES, "metadata string", what)?)),
            vt::ARRAY => {
                let (elem, len) = self.array_header(1, what)?;
                let numeric = fixed_size(elem).is_some() && elem != vt::F32 && elem != vt::F64;
                if numeric && len <= MAX_KEPT_ARRAY {
                    let mut values = Vec::with_capacity(len as usize);
                    for _ in 0..len {
                        values.push(match self.scalar(elem, what)? {
                            Meta::Int(v) => v,
                            Meta::Bool(b) => i128::from(b),
                            _ => 0,
                        });
                    }
                    Ok(Meta::Array(values))
                } else {
                    self.skip_array(elem, len, 1, what)?;
                    Ok(Meta::Skipped { elem, len })
                }
            }
            other => self.scalar(other, what),
        }
    }

    fn parse(&mut self) -> Result<Parsed, GgufError> {
        let what = || "the GGUF magic".to_string();
        self.need(4, &what)?;
        let magic: [u8; 4] = self.bytes(&what)?;
        if magic != MAGIC {
            return Err(GgufError::NotGguf { found: magic });
        }
        let version = self.u32(&|| "the GGUF version".to_string())?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { version });
        }
        let tensor_count = self.u64(&|| "the tensor count".to_string())?;
        let kv_count = self.u64(&|| "the metadata KV count".to_string())?;
        if tensor_count > MAX_TENSOR_COUNT {
            return Err(GgufError::TooLarge { what: "tensor count", value: tensor_count, max: MAX_TENSOR_COUNT });
        }
        if kv_count > MAX_KV_COUNT {
            return Err(GgufError::TooLarge { what: "metadata KV count", value: kv_count, max: MAX_KV_COUNT });
        }
        let least = kv_count * MIN_KV_BYTES + tensor_count * MIN_TENSOR_INFO_BYTES;
        if least > self.left() {
            return Err(GgufError::Lies(format!(
                "the header claims {kv_count} metadata KVs and {tensor_count} tensors (at least {least} bytes) \
                 but only {} bytes are left",
                self.left()
            )));
        }

        let kept = self.metadata(kv_count)?;
        let alignment = match kept.get(KEY_ALIGNMENT) {
            None => DEFAULT_ALIGNMENT,
            Some(Meta::Int(a)) if *a > 0 && (*a as u64).is_power_of_two() && *a <= i128::from(u32::MAX) => *a as u64,
            Some(other) => {
                return Err(GgufError::Malformed(format!(
                    "{KEY_ALIGNMENT} must be a u32 power of two, found {other:?}"
                )));
            }
        };

        let mut tensors = Vec::new();
        let mut names = HashSet::new();
        for i in 0..tensor_count {
            let info = self.tensor_info(i)?;
            if !names.insert(info.name.clone()) {
                return Err(GgufError::Malformed(format!("duplicate tensor name '{}'", info.name)));
            }
            tensors.push(info);
        }

        // The data section starts at the next multiple of the alignment
        // (llama.cpp's gguf.cpp seeks there only when there are tensors).
        let tensor_data_offset = if tensor_count > 0 {
            align_up(self.pos, alignment)
                .ok_or_else(|| GgufError::Malformed("the tensor data offset overflows".to_string()))?
        } else {
            self.pos
        };
        if tensor_count > 0 && tensor_data_offset > self.size {
            return Err(GgufError::Truncated {
                what: "the tensor data section".to_string(),
                needed: tensor_data_offset,
                file_size: self.size,
            });
        }
        check_extents(&tensors, tensor_data_offset, alignment, self.size)?;

        Ok(Parsed { version, kv_count, kept, tensors, tensor_data_offset, alignment, file_size: self.size })
    }

    /// Reads the `kv_count` metadata KVs, keeping only what the estimate
    /// reads.
    fn metadata(&mut self, kv_count: u64) -> Result<HashMap<String, Meta>, GgufError> {
        let mut kept: HashMap<String, Meta> = HashMap::new();
        for i in 0..kv_count {
            let key = self.string(MAX_KEY_BYTES, "metadata key", &|| format!("metadata key {i}"))?;
            if key.is_empty() {
                return Err(GgufError::Malformed(format!("metadata key {i} is empty")));
            }
            let what = || format!("metadata value '{}'", key);
            let ty = self.u32(&what)?;
            check_type(ty, &what)?;
            if key == KEY_TOKENS {
                // The vocabulary: only its length is kept (a 256k-token list
                // is skipped string by string, never collected).
                if ty != vt::ARRAY {
                    return Err(GgufError::Malformed(format!("{KEY_TOKENS} is not an array")));
                }
                let (elem, len) = self.array_header(1, &what)?;
                self.skip_array(elem, len, 1, &what)?;
                insert_kept(&mut kept, key, Meta::Skipped { elem, len })?;
            } else if is_kept_key(&key) {
                let value = self.kept_value(ty, &what)?;
                insert_kept(&mut kept, key, value)?;
            } else {
                self.skip_value(ty, 0, &what)?;
            }
        }
        Ok(kept)
    }

    fn tensor_info(&mut self, i: u64) -> Result<TensorInfo, GgufError> {
        let name = self.string(MAX_TENSOR_NAME_BYTES, "tensor name", &|| format!("the name of tensor {i}"))?;
        let what = || format!("tensor '{name}'");
        let n_dims = self.u32(&what)?;
        if n_dims > MAX_TENSOR_DIMS {
            return Err(GgufError::TooLarge {
                what: "tensor dimension count",
                value: u64::from(n_dims),
                max: u64::from(MAX_TENSOR_DIMS),
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let d = self.u64(&what)?;
            // ggml reads dimensions as int64_t and refuses negative ones.
            if d > i64::MAX as u64 {
                return Err(GgufError::Malformed(format!("{} has a negative dimension", what())));
            }
            dims.push(d);
        }
        let type_id = self.u32(&what)?;
        let offset = self.u64(&what)?;
        let ty = ggml_type(type_id)
            .ok_or_else(|| GgufError::Malformed(format!("tensor {name} has unknown ggml type {type_id}")))?;
        let bytes = tensor_bytes(ty, &dims).map_err(|e| match e {
            SizeError::NotBlockMultiple { row, block_size } => GgufError::Malformed(format!(
                "tensor {name} of type {} has {row} elements per row, not a multiple of its block size {block_size}",
                ty.name
            )),
            SizeError::Overflow => {
                GgufError::Malformed(format!("tensor {name} of shape {dims:?} overflows its element or byte count"))
            }
        })?;
        Ok(TensorInfo { name, dims, ggml_type: type_id, offset, bytes })
    }
}

fn check_type(ty: u32, what: &dyn Fn() -> String) -> Result<(), GgufError> {
    if ty > vt::F64 {
        return Err(GgufError::Malformed(format!("{} has unknown value type {ty}", what())));
    }
    Ok(())
}

/// Whether the estimate reads `key`: `general.alignment`,
/// `general.architecture`, or `<arch>.<suffix>` for one of [`ARCH_KEYS`]
/// with an arch name without dots.
fn is_kept_key(key: &str) -> bool {
    if key == KEY_ALIGNMENT || key == KEY_ARCHITECTURE {
        return true;
    }
    ARCH_KEYS.iter().any(|suffix| key.strip_suffix(suffix).is_some_and(|arch| !arch.is_empty() && !arch.contains('.')))
}

fn insert_kept(kept: &mut HashMap<String, Meta>, key: String, value: Meta) -> Result<(), GgufError> {
    if kept.contains_key(&key) {
        return Err(GgufError::Malformed(format!("duplicate metadata key '{key}'")));
    }
    if kept.len() >= MAX_KEPT_KEYS {
        return Err(GgufError::TooLarge {
            what: "architecture metadata keys",
            value: kept.len() as u64 + 1,
            max: MAX_KEPT_KEYS as u64,
        });
    }
    kept.insert(key, value);
    Ok(())
}

/// `pos` rounded up to a multiple of `alignment` (a power of two).
pub(super) fn align_up(pos: u64, alignment: u64) -> Option<u64> {
    Some(pos.checked_add(alignment - 1)? & !(alignment - 1))
}

/// Every tensor is aligned, inside the file, and overlaps no other.
fn check_extents(tensors: &[TensorInfo], data_offset: u64, alignment: u64, file_size: u64) -> Result<(), GgufError> {
    for t in tensors {
        if t.offset % alignment != 0 {
            return Err(GgufError::Malformed(format!(
                "tensor {} is at offset {}, not a multiple of the alignment {alignment}",
                t.name, t.offset
            )));
        }
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(t.bytes))
            .ok_or_else(|| GgufError::Lies(format!("tensor {} ends past u64", t.name)))?;
        if end > file_size {
            return Err(GgufError::Truncated {
                what: format!("the data of tensor {}", t.name),
                needed: end,
                file_size,
            });
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| (t.offset, t.bytes));
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Both fit in the file, so the sum cannot overflow.
        if b.offset < a.offset + a.bytes {
            return Err(GgufError::Lies(format!(
                "tensors {} ({} bytes at {}) and {} (at {}) overlap",
                a.name, a.bytes, a.offset, b.name, b.offset
            )));
        }
    }
    Ok(())
}
