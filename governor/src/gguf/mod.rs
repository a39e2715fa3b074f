//! The GGUF header reader and the sizing of a llama-server run (SPEC Q2:
//! "a llama-server start estimated from the GGUF file: weights, KV cache for
//! the context size, overhead; VRAM or RAM depending on offload"; SPEC M11:
//! the governor starts its own llama-server on an operator's GGUF file).
//!
//! [`read_header`] reads a GGUF v2 or v3 file's header — every metadata KV,
//! every tensor info — through a buffered reader, and never its tensor data:
//! the tokenizer's ~256k strings are skipped one length at a time, numeric
//! arrays in one seek, so a multi-GB model's header parses in a few
//! milliseconds. [`GgufHeader::estimate`] turns it into what the ledger
//! reserves ([`estimate`] documents the formula, its constants and their
//! calibration on a real llama-server), and [`Estimate::server_args`] into
//! the llama-server flags that keep the run within it. [`testing`] writes
//! synthetic GGUF files (sparse multi-GB ones too) for tests and benchmarks.
//!
//! # Bad input
//!
//! A file is refused with a [`GgufError`], never a panic, and nothing is
//! allocated or skipped before its length has been checked against a named
//! bound and against the bytes left in the file:
//!
//! | bound | value | why |
//! |---|---|---|
//! | [`MAX_KV_COUNT`] | 1,000,000 | real files have ~40 KVs |
//! | [`MAX_TENSOR_COUNT`] | 65,536 | a 1T-parameter MoE has ~2,000 tensors |
//! | [`MAX_STRING_BYTES`] | 1 MiB | the longest strings are chat templates (tens of KiB) |
//! | [`MAX_KEY_BYTES`] | 65,535 | the GGUF spec's key limit |
//! | [`MAX_TENSOR_NAME_BYTES`] | 63 | ggml's `GGML_MAX_NAME` (64, with the NUL) |
//! | [`MAX_TENSOR_DIMS`] | 4 | ggml's `GGML_MAX_DIMS` |
//! | [`MAX_BLOCK_COUNT`] | 512 | llama.cpp's `LLAMA_MAX_LAYERS` |
//! | [`MAX_ARRAY_NESTING`] | 8 | arrays of arrays (the spec allows them; llama.cpp refuses any) |
//! | [`MAX_HEADER_BYTES`] | 64 MiB | everything before the tensor data (real: ≤ ~20 MiB) |
//! | `MAX_KEPT_KEYS` | 1,024 | keys shaped like those the estimate reads (real: ~10) |
//!
//! Array lengths and KV/tensor counts are also checked against the bytes
//! left (each element's smallest encoding): a count the file cannot hold is
//! [`GgufError::Lies`]. Tensor types come from ggml's table
//! ([`ggml_type()`]); an unknown id, a row that is not whole blocks, an
//! overflowing shape, a misaligned offset are [`GgufError::Malformed`];
//! overlapping tensors are [`GgufError::Lies`]; a tensor running past the
//! end of the file is [`GgufError::Truncated`]. Only a regular file is read
//! (a directory, a device, a FIFO are refused before any read).

use std::path::{Path, PathBuf};

pub mod estimate;
pub mod ggml_type;
mod parse;
#[doc(hidden)]
pub mod testing;

pub use estimate::{Estimate, LaunchParams};
pub use ggml_type::{GgmlType, ggml_type};

use parse::{KEY_ARCHITECTURE, KEY_TOKENS, Meta};

/// Most metadata KVs a header may declare.
pub const MAX_KV_COUNT: u64 = 1_000_000;
/// Most tensors a header may declare.
pub const MAX_TENSOR_COUNT: u64 = 65_536;
/// Longest metadata string value, in bytes.
pub const MAX_STRING_BYTES: u64 = 1024 * 1024;
/// Longest metadata key, in bytes (the GGUF spec: at most 65,535).
pub const MAX_KEY_BYTES: u64 = 65_535;
/// Longest tensor name, in bytes (`GGML_MAX_NAME` is 64 with the NUL).
pub const MAX_TENSOR_NAME_BYTES: u64 = 63;
/// Most dimensions of a tensor (`GGML_MAX_DIMS`).
pub const MAX_TENSOR_DIMS: u32 = 4;
/// Most blocks (layers) a model may declare (`LLAMA_MAX_LAYERS`).
pub const MAX_BLOCK_COUNT: u32 = 512;
/// Deepest nesting of arrays in a metadata value.
pub const MAX_ARRAY_NESTING: u32 = 8;
/// Most bytes before the end of the tensor infos (metadata and tensor
/// infos together).
pub const MAX_HEADER_BYTES: u64 = 64 * 1024 * 1024;
/// Tensor data alignment when `general.alignment` is absent (GGUF spec,
/// `GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Why a GGUF file cannot be used. Every variant is the file's fault (or
/// its path's), none is a bug of the reader.
#[derive(thiserror::Error, Debug)]
pub enum GgufError {
    /// Opening, inspecting or reading the file failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The error of the system.
        #[source]
        source: std::io::Error,
    },
    /// The path is a directory, a device, a FIFO or a socket.
    #[error("{} is not a regular file", path.display())]
    NotRegularFile {
        /// The path given.
        path: PathBuf,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file: it starts with {found:02x?}, not \"GGUF\"")]
    NotGguf {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// A GGUF version other than 2 or 3 (version 1 is obsolete, llama.cpp
    /// refuses it too; 4 and later do not exist yet).
    #[error("unsupported GGUF version {version}{}: only versions 2 and 3 are read", endian_hint(*version))]
    UnsupportedVersion {
        /// The version read (little-endian).
        version: u32,
    },
    /// The file ends before something the header says is there.
    #[error("truncated GGUF file: {what} needs the file to reach byte {needed}, but it has {file_size} bytes")]
    Truncated {
        /// What was being read.
        what: String,
        /// The end offset that was needed.
        needed: u64,
        /// The file's size.
        file_size: u64,
    },
    /// A value is invalid: unknown type, bad UTF-8, shape not whole blocks,
    /// misaligned tensor, missing or mistyped key.
    #[error("malformed GGUF file: {0}")]
    Malformed(String),
    /// The header claims more than the file can hold (a count or a length
    /// larger than the bytes left), or tensors that overlap.
    #[error("the GGUF header lies: {0}")]
    Lies(String),
    /// A count or a length exceeds one of the named bounds of this module.
    #[error("GGUF {what} is {value}, more than the bound {max}")]
    TooLarge {
        /// What is bounded.
        what: &'static str,
        /// The value found (or reached).
        value: u64,
        /// The bound.
        max: u64,
    },
}

fn endian_hint(version: u32) -> &'static str {
    if version != 0 && version & 0xFFFF == 0 { " (a big-endian file?)" } else { "" }
}

/// One tensor's description from the header (its data is never read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (`token_embd.weight`, `blk.3.attn_q.weight`, …).
    pub name: String,
    /// Its shape, innermost dimension first (ggml's `ne`), 0 to 4 entries.
    pub dims: Vec<u64>,
    /// Its ggml type id ([`ggml_type()`] gives the name and block sizes).
    pub ggml_type: u32,
    /// Its offset from the start of the tensor data section.
    pub offset: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

impl TensorInfo {
    /// The block index of a `blk.<i>.…` tensor, `None` for the others
    /// (embeddings, output, norms outside the blocks).
    pub fn block(&self) -> Option<u32> {
        self.name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
    }
}

/// What the estimate needs from a GGUF file's header.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// `general.architecture` (`llama`, `gemma3`, `qwen3`, …).
    pub architecture: String,
    /// `<arch>.block_count`: the repeating layers.
    pub block_count: u32,
    /// `<arch>.embedding_length`.
    pub embedding_length: u32,
    /// `<arch>.attention.head_count` (the largest, when given per layer; 0
    /// when absent, as in recurrent models).
    pub head_count: u32,
    /// `<arch>.attention.head_count_kv` (the largest, when given per layer;
    /// `head_count` when absent, as llama.cpp defaults it).
    pub head_count_kv: u32,
    /// `<arch>.context_length`: the training context.
    pub context_length: u32,
    /// `<arch>.attention.key_length` (head size of K), when given.
    pub key_length: Option<u32>,
    /// `<arch>.attention.value_length` (head size of V), when given.
    pub value_length: Option<u32>,
    /// `<arch>.attention.sliding_window`, when given and non-zero.
    pub sliding_window: Option<u32>,
    /// `<arch>.feed_forward_length` (the largest, when given per layer).
    pub feed_forward_length: Option<u32>,
    /// Attention heads per layer (`block_count` entries).
    pub head_count_per_layer: Vec<u32>,
    /// KV heads per layer (`block_count` entries): what the KV cache holds.
    pub head_count_kv_per_layer: Vec<u32>,
    /// Which layers use the sliding-window KV cache (`block_count`
    /// entries; all `false` without sliding-window attention). See
    /// [`estimate`] for how the pattern is found.
    pub swa_layers: Vec<bool>,
    /// Tokens in the vocabulary: the length of `tokenizer.ggml.tokens`, or
    /// the second dimension of `token_embd.weight`.
    pub vocab_size: Option<u32>,
    /// Tensor data alignment (`general.alignment`, default 32).
    pub alignment: u64,
    /// Metadata KVs in the file.
    pub kv_count: u64,
    /// The tensor infos, in file order.
    pub tensors: Vec<TensorInfo>,
    /// Where the tensor data section starts in the file.
    pub tensor_data_offset: u64,
    /// The file's size in bytes.
    pub file_size: u64,
}

/// Reads the header of the GGUF file at `path` (a regular file), checks it
/// (see the module doc), and never reads tensor data.
pub fn read_header(path: &Path) -> Result<GgufHeader, GgufError> {
    let parsed = parse::parse(path)?;
    let header = assemble(parsed)?;
    tracing::debug!(
        architecture = %header.architecture,
        blocks = header.block_count,
        tensors = header.tensors.len(),
        "GGUF header read"
    );
    Ok(header)
}

/// The same reading and checks as [`read_header`], on a header held in
/// memory: the first bytes of a file that is `file_size` bytes long (the
/// fuzz target `gguf_header` and tests; the governor itself reads files).
pub fn header_from_bytes(bytes: &[u8], file_size: u64) -> Result<GgufHeader, GgufError> {
    assemble(parse::parse_bytes(bytes, file_size)?)
}

/// Architectures whose sliding-window layers llama.cpp lays out by a
/// period when the file has no `<arch>.attention.sliding_window_pattern`:
/// (architecture, period, dense layer first). From each model's
/// `load_swa_pattern(ml, n, dense_first)` in llama.cpp's `src/models/`.
const SWA_PATTERNS: &[(&str, u32, bool)] = &[
    ("gemma2", 2, false),
    ("gemma3", 6, false),
    ("gemma3n", 5, false),
    ("gemma-embedding", 6, false),
    ("cohere2", 4, false),
    ("olmo2", 4, false),
    ("gpt-oss", 2, false),
    ("plamo3", 8, false),
    ("afmoe", 4, false),
    ("mellum", 4, false),
    ("laguna", 4, true),
];

/// llama.cpp's `llama_hparams::set_swa_pattern`: with period `n`, layer
/// `il` is sliding-window unless it is the last of its period (or, dense
/// first, the first); a period of 0 makes every layer sliding-window.
fn swa_by_period(blocks: u32, n: u32, dense_first: bool) -> Vec<bool> {
    (0..blocks)
        .map(|il| {
            if n == 0 {
                true
            } else if dense_first {
                il % n != 0
            } else {
                il % n < n - 1
            }
        })
        .collect()
}

fn assemble(p: parse::Parsed) -> Result<GgufHeader, GgufError> {
    let kept = &p.kept;
    let architecture = match kept.get(KEY_ARCHITECTURE) {
        Some(Meta::Str(s)) if !s.is_empty() => s.clone(),
        Some(other) => return Err(GgufError::Malformed(format!("{KEY_ARCHITECTURE} is not a string: {other:?}"))),
        None => return Err(GgufError::Malformed(format!("{KEY_ARCHITECTURE} is missing"))),
    };
    let key = |suffix: &str| format!("{architecture}{suffix}");
    let scalar = |suffix: &str| -> Result<Option<u32>, GgufError> {
        let k = key(suffix);
        match kept.get(&k) {
            None => Ok(None),
            Some(m) => as_u32(m).map(Some).ok_or_else(|| GgufError::Malformed(format!("{k} is not a u32: {m:?}"))),
        }
    };
    let required = |suffix: &str| -> Result<u32, GgufError> {
        scalar(suffix)?.ok_or_else(|| GgufError::Malformed(format!("{} is missing", key(suffix))))
    };
    let block_count = required(".block_count")?;
    if block_count > MAX_BLOCK_COUNT {
        return Err(GgufError::TooLarge {
            what: "block count",
            value: u64::from(block_count),
            max: u64::from(MAX_BLOCK_COUNT),
        });
    }
    // A value given once or once per layer (llama.cpp's get_key_or_arr:
    // an array must have one entry per block).
    let per_layer = |suffix: &str| -> Result<Option<Vec<u32>>, GgufError> {
        let k = key(suffix);
        match kept.get(&k) {
            None => Ok(None),
            Some(Meta::Array(values)) => {
                if values.len() != block_count as usize {
                    return Err(GgufError::Malformed(format!(
                        "{k} has {} entries for {block_count} blocks",
                        values.len()
                    )));
                }
                values
                    .iter()
                    .map(|v| u32::try_from(*v).ok())
                    .collect::<Option<Vec<u32>>>()
                    .map(Some)
                    .ok_or_else(|| GgufError::Malformed(format!("{k} has an entry that is not a u32")))
            }
            Some(m) => match as_u32(m) {
                Some(v) => Ok(Some(vec![v; block_count as usize])),
                None => Err(GgufError::Malformed(format!("{k} is not a u32 or an array of one per block: {m:?}"))),
            },
        }
    };
    let embedding_length = required(".embedding_length")?;
    let context_length = required(".context_length")?;
    let head_count_per_layer = per_layer(".attention.head_count")?.unwrap_or_else(|| vec![0; block_count as usize]);
    let head_count_kv_per_layer =
        per_layer(".attention.head_count_kv")?.unwrap_or_else(|| head_count_per_layer.clone());
    let feed_forward_length = per_layer(".feed_forward_length")?.map(|v| v.into_iter().max().unwrap_or(0));
    let sliding_window = scalar(".attention.sliding_window")?.filter(|&w| w > 0);

    let swa_layers = match sliding_window {
        None => vec![false; block_count as usize],
        Some(_) => {
            let k = key(".attention.sliding_window_pattern");
            let known = SWA_PATTERNS.iter().find(|(a, _, _)| *a == architecture);
            match kept.get(&k) {
                Some(Meta::Array(values)) if values.len() == block_count as usize => {
                    values.iter().map(|&v| v != 0).collect()
                }
                Some(Meta::Array(values)) => {
                    return Err(GgufError::Malformed(format!(
                        "{k} has {} entries for {block_count} blocks",
                        values.len()
                    )));
                }
                Some(m) => {
                    let n = as_u32(m).ok_or_else(|| GgufError::Malformed(format!("{k} is not a u32: {m:?}")))?;
                    swa_by_period(block_count, n, known.is_some_and(|(_, _, dense_first)| *dense_first))
                }
                None => match known {
                    Some((_, n, dense_first)) => swa_by_period(block_count, *n, *dense_first),
                    // An architecture whose pattern is not known here: every
                    // layer is counted with a full-size cache (an
                    // over-estimate, never an under-estimate).
                    None => vec![false; block_count as usize],
                },
            }
        }
    };

    let vocab_size = match kept.get(KEY_TOKENS) {
        Some(Meta::Skipped { len, .. }) => {
            Some(u32::try_from(*len).map_err(|_| GgufError::Malformed(format!("{KEY_TOKENS} has {len} entries")))?)
        }
        _ => p
            .tensors
            .iter()
            .find(|t| t.name == "token_embd.weight")
            .and_then(|t| t.dims.get(1))
            .and_then(|&d| u32::try_from(d).ok()),
    };

    Ok(GgufHeader {
        version: p.version,
        head_count: head_count_per_layer.iter().copied().max().unwrap_or(0),
        head_count_kv: head_count_kv_per_layer.iter().copied().max().unwrap_or(0),
        key_length: scalar(".attention.key_length")?,
        value_length: scalar(".attention.value_length")?,
        architecture,
        block_count,
        embedding_length,
        context_length,
        sliding_window,
        feed_forward_length,
        head_count_per_layer,
        head_count_kv_per_layer,
        swa_layers,
        vocab_size,
        alignment: p.alignment,
        kv_count: p.kv_count,
        tensors: p.tensors,
        tensor_data_offset: p.tensor_data_offset,
        file_size: p.file_size,
    })
}

/// An integer value that fits in a u32.
fn as_u32(m: &Meta) -> Option<u32> {
    match m {
        Meta::Int(v) => u32::try_from(*v).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
