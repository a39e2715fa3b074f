//! A writer of synthetic GGUF files, for tests and benchmarks (not part of
//! the governor's behaviour). It writes any header, valid or not: counts,
//! offsets, types and the version can all be set to lies. A model-shaped
//! file ([`model`]) written with [`GgufBuilder::write_sparse`] is a header
//! followed by `File::set_len`: a multi-GB file that costs a few MB of disk.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use super::ggml_type::{ggml_type, tensor_bytes};
use super::parse::{align_up, vt};

/// A metadata value to write.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool` (one byte).
    Bool(bool),
    /// A string.
    Str(String),
    /// An array: element type id, elements (written without their type).
    Array(u32, Vec<Value>),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
    /// Any type id followed by raw bytes (to write invalid values).
    Raw(u32, Vec<u8>),
}

impl Value {
    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => vt::U8,
            Value::I8(_) => vt::I8,
            Value::U16(_) => vt::U16,
            Value::I16(_) => vt::I16,
            Value::U32(_) => vt::U32,
            Value::I32(_) => vt::I32,
            Value::F32(_) => vt::F32,
            Value::Bool(_) => vt::BOOL,
            Value::Str(_) => vt::STRING,
            Value::Array(..) => vt::ARRAY,
            Value::U64(_) => vt::U64,
            Value::I64(_) => vt::I64,
            Value::F64(_) => vt::F64,
            Value::Raw(t, _) => *t,
        }
    }

    /// An array of strings.
    pub fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Value {
        Value::Array(vt::STRING, items.into_iter().map(|s| Value::Str(s.into())).collect())
    }

    /// An array of u32.
    pub fn u32s(items: &[u32]) -> Value {
        Value::Array(vt::U32, items.iter().map(|&v| Value::U32(v)).collect())
    }

    /// The payload (no type id).
    fn payload(&self, out: &mut Vec<u8>) {
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.extend(v.to_le_bytes()),
            Value::U16(v) => out.extend(v.to_le_bytes()),
            Value::I16(v) => out.extend(v.to_le_bytes()),
            Value::U32(v) => out.extend(v.to_le_bytes()),
            Value::I32(v) => out.extend(v.to_le_bytes()),
            Value::F32(v) => out.extend(v.to_le_bytes()),
            Value::Bool(v) => out.push(u8::from(*v)),
            Value::Str(s) => put_str(out, s),
            Value::Array(elem, items) => {
                out.extend(elem.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                for item in items {
                    item.payload(out);
                }
            }
            Value::U64(v) => out.extend(v.to_le_bytes()),
            Value::I64(v) => out.extend(v.to_le_bytes()),
            Value::F64(v) => out.extend(v.to_le_bytes()),
            Value::Raw(_, bytes) => out.extend(bytes),
        }
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// One tensor to describe.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Its name.
    pub name: String,
    /// Its shape.
    pub dims: Vec<u64>,
    /// Its ggml type id.
    pub ggml_type: u32,
    /// Its offset in the data section; `None`: the next aligned offset.
    pub offset: Option<u64>,
}

/// A GGUF file being described.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufBuilder {
    /// The magic (`GGUF`).
    pub magic: [u8; 4],
    /// The version written.
    pub version: u32,
    /// The metadata KVs, in order.
    pub kvs: Vec<(String, Value)>,
    /// The tensors, in order.
    pub tensors: Vec<TensorSpec>,
    /// The alignment used to lay the data out (see [`Self::alignment`]).
    pub layout_alignment: u64,
    /// A KV count to write instead of the true one.
    pub kv_count: Option<u64>,
    /// A tensor count to write instead of the true one.
    pub tensor_count: Option<u64>,
}

impl GgufBuilder {
    /// A v3 file with no KV and no tensor.
    pub fn empty() -> Self {
        GgufBuilder {
            magic: *b"GGUF",
            version: 3,
            kvs: Vec::new(),
            tensors: Vec::new(),
            layout_alignment: super::DEFAULT_ALIGNMENT,
            kv_count: None,
            tensor_count: None,
        }
    }

    /// A v3 file with `general.architecture` = `arch`.
    pub fn new(arch: &str) -> Self {
        Self::empty().kv("general.architecture", Value::Str(arch.into()))
    }

    /// Adds a KV.
    pub fn kv(mut self, key: &str, value: Value) -> Self {
        self.kvs.push((key.into(), value));
        self
    }

    /// Adds a tensor at the next aligned offset.
    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32) -> Self {
        self.tensors.push(TensorSpec { name: name.into(), dims: dims.to_vec(), ggml_type, offset: None });
        self
    }

    /// Adds a tensor at `offset` (which may be wrong on purpose).
    pub fn tensor_at(mut self, name: &str, dims: &[u64], ggml_type: u32, offset: u64) -> Self {
        self.tensors.push(TensorSpec { name: name.into(), dims: dims.to_vec(), ggml_type, offset: Some(offset) });
        self
    }

    /// Writes `general.alignment` = `a` and lays the data out with it.
    pub fn alignment(mut self, a: u32) -> Self {
        self.layout_alignment = u64::from(a.max(1));
        self.kv("general.alignment", Value::U32(a))
    }

    /// The bytes of a tensor as laid out (0 for an unknown type or a shape
    /// that is not whole blocks).
    fn bytes_of(t: &TensorSpec) -> u64 {
        ggml_type(t.ggml_type).and_then(|ty| tensor_bytes(ty, &t.dims).ok()).unwrap_or(0)
    }

    /// Each tensor's offset in the data section, and the data section's
    /// length.
    pub fn layout(&self) -> (Vec<u64>, u64) {
        let align = self.layout_alignment.next_power_of_two();
        let mut next = 0u64;
        let mut end = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let offset = t.offset.unwrap_or_else(|| align_up(next, align).unwrap_or(next));
            let stop = offset.saturating_add(Self::bytes_of(t));
            next = next.max(stop);
            end = end.max(stop);
            offsets.push(offset);
        }
        (offsets, end)
    }

    /// The header: magic, version, counts, KVs, tensor infos, and the
    /// padding up to the data section (when there are tensors).
    pub fn header_bytes(&self) -> Vec<u8> {
        let mut out = self.header_unpadded();
        if !self.tensors.is_empty() {
            let align = self.layout_alignment.next_power_of_two();
            let padded = align_up(out.len() as u64, align).unwrap_or(out.len() as u64);
            out.resize(padded as usize, 0);
        }
        out
    }

    /// The header without the padding: its length is where the tensor infos
    /// end.
    pub fn header_unpadded(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(self.magic);
        out.extend(self.version.to_le_bytes());
        out.extend(self.tensor_count.unwrap_or(self.tensors.len() as u64).to_le_bytes());
        out.extend(self.kv_count.unwrap_or(self.kvs.len() as u64).to_le_bytes());
        for (key, value) in &self.kvs {
            put_str(&mut out, key);
            out.extend(value.type_id().to_le_bytes());
            value.payload(&mut out);
        }
        let (offsets, _) = self.layout();
        for (t, offset) in self.tensors.iter().zip(offsets) {
            put_str(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.ggml_type.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        out
    }

    /// The whole file's length.
    pub fn file_len(&self) -> u64 {
        self.header_bytes().len() as u64 + self.layout().1
    }

    /// The whole file in memory, tensor data zeroed (small files only).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header_bytes();
        out.resize(out.len() + self.layout().1 as usize, 0);
        out
    }

    /// Writes the header and extends the file to its full length with
    /// `set_len`: the tensor data is a hole, so a multi-GB model costs only
    /// its header on disk. Returns the file's length.
    pub fn write_sparse(&self, path: &Path) -> io::Result<u64> {
        let header = self.header_bytes();
        let len = header.len() as u64 + self.layout().1;
        let mut f = File::create(path)?;
        f.write_all(&header)?;
        f.set_len(len)?;
        Ok(len)
    }
}

/// The shape of a synthetic transformer (llama-style tensor names).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    /// `general.architecture`.
    pub arch: String,
    /// Blocks.
    pub blocks: u32,
    /// Embedding length.
    pub embd: u32,
    /// Attention heads.
    pub heads: u32,
    /// KV heads.
    pub heads_kv: u32,
    /// Head size, written as key/value length when `Some`.
    pub head_dim: Option<u32>,
    /// Feed-forward length.
    pub ff: u32,
    /// Vocabulary size (the token list and the embedding's rows).
    pub vocab: u32,
    /// Training context.
    pub ctx_train: u32,
    /// Type of the 2-D weights (norms are F32).
    pub weight_type: u32,
    /// Written as `<arch>.attention.sliding_window` when `Some`.
    pub sliding_window: Option<u32>,
    /// No `output.weight`: the output reuses `token_embd.weight`.
    pub tied_output: bool,
    /// Write `tokenizer.ggml.tokens` (one string per token).
    pub tokens: bool,
}

impl ModelShape {
    /// A small llama-shaped model (F32 weights, a few KB).
    pub fn tiny() -> Self {
        ModelShape {
            arch: "llama".into(),
            blocks: 4,
            embd: 64,
            heads: 4,
            heads_kv: 2,
            head_dim: None,
            ff: 128,
            vocab: 256,
            ctx_train: 4096,
            weight_type: 0,
            sliding_window: None,
            tied_output: false,
            tokens: true,
        }
    }

    /// The head size written or implied.
    fn hd(&self) -> u64 {
        u64::from(self.head_dim.unwrap_or(self.embd / self.heads.max(1)))
    }
}

/// A model-shaped file: the architecture keys, a token list, and the
/// tensors of a llama-style transformer (`token_embd`, per block
/// `attn_norm`, `attn_q/k/v/output`, `ffn_norm`, `ffn_gate/up/down`, then
/// `output_norm` and `output` unless tied).
pub fn model(s: &ModelShape) -> GgufBuilder {
    let a = &s.arch;
    let mut b = GgufBuilder::new(a)
        .kv(&format!("{a}.block_count"), Value::U32(s.blocks))
        .kv(&format!("{a}.context_length"), Value::U32(s.ctx_train))
        .kv(&format!("{a}.embedding_length"), Value::U32(s.embd))
        .kv(&format!("{a}.feed_forward_length"), Value::U32(s.ff))
        .kv(&format!("{a}.attention.head_count"), Value::U32(s.heads))
        .kv(&format!("{a}.attention.head_count_kv"), Value::U32(s.heads_kv));
    if let Some(hd) = s.head_dim {
        b = b
            .kv(&format!("{a}.attention.key_length"), Value::U32(hd))
            .kv(&format!("{a}.attention.value_length"), Value::U32(hd));
    }
    if let Some(w) = s.sliding_window {
        b = b.kv(&format!("{a}.attention.sliding_window"), Value::U32(w));
    }
    b = b.kv("general.name", Value::Str(format!("synthetic {a}")));
    if s.tokens {
        b = b.kv("tokenizer.ggml.model", Value::Str("llama".into()));
        b = b.kv("tokenizer.ggml.tokens", Value::strings((0..s.vocab).map(|i| format!("<tok{i}>"))));
        b = b.kv("tokenizer.ggml.scores", Value::Array(vt::F32, (0..s.vocab).map(|_| Value::F32(0.0)).collect()));
    }
    let (embd, ff, vocab, hd) = (u64::from(s.embd), u64::from(s.ff), u64::from(s.vocab), s.hd());
    let (q, kv) = (hd * u64::from(s.heads), hd * u64::from(s.heads_kv));
    let w = s.weight_type;
    b = b.tensor("token_embd.weight", &[embd, vocab], w);
    for i in 0..s.blocks {
        b = b
            .tensor(&format!("blk.{i}.attn_norm.weight"), &[embd], 0)
            .tensor(&format!("blk.{i}.attn_q.weight"), &[embd, q], w)
            .tensor(&format!("blk.{i}.attn_k.weight"), &[embd, kv], w)
            .tensor(&format!("blk.{i}.attn_v.weight"), &[embd, kv], w)
            .tensor(&format!("blk.{i}.attn_output.weight"), &[q, embd], w)
            .tensor(&format!("blk.{i}.ffn_norm.weight"), &[embd], 0)
            .tensor(&format!("blk.{i}.ffn_gate.weight"), &[embd, ff], w)
            .tensor(&format!("blk.{i}.ffn_up.weight"), &[embd, ff], w)
            .tensor(&format!("blk.{i}.ffn_down.weight"), &[ff, embd], w);
    }
    b = b.tensor("output_norm.weight", &[embd], 0);
    if !s.tied_output {
        b = b.tensor("output.weight", &[embd, vocab], w);
    }
    b
}
