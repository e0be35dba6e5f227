//! The binary interface between Rust and the kernels, declared once here.
//!
//! Every integer code the kernels switch on is a `#[repr(i32)]` enum, every
//! structure passed to a kernel (by value in its parameters, or in a table
//! in device memory) a `#[repr(C)]` struct, and every size both sides share
//! a constant. `kernels/abi.h` is generated from these declarations
//! ([`c_header`], written by `cargo xtask build-ptx`) and included by the
//! `.cu` files, so the two sides cannot disagree on a name, a value, a field
//! or its order. Tests check that the committed header is current and that
//! each field's C type has the size of its Rust type; the kernel parameter
//! lists are checked against the committed PTX (see the crate root).
//!
//! Every struct has explicit padding fields, so none has a byte the
//! compiler leaves uninitialised (`bytemuck::NoUninit`: a table of them is
//! uploaded as bytes).

/// Most channel groups a resample or fused stream takes (they travel in the
/// kernels' parameters).
pub const MAX_GROUPS: usize = 32;

/// Fused streams passed in the launch parameters; more go in a table in
/// device memory.
pub const FUSION_INLINE: usize = 16;

/// The most targets a block of the tiled kernels takes.
pub const MAX_TILE: usize = 32;

/// Warps in a block of the tiled kernels.
pub const TILE_WARPS: usize = 8;

/// Pixels of one frame a thread of `augment_pass` takes (a frame's
/// threads apart): the grid has a frame's pixels over this many threads.
pub const AUGMENT_PIXELS_PER_THREAD: usize = 4;

/// The constants of the header: `(C name, value)`.
const CONSTANTS: [(&str, usize); 5] = [
    ("MAX_GROUPS", MAX_GROUPS),
    ("FUSION_INLINE", FUSION_INLINE),
    ("MAX_TILE", MAX_TILE),
    ("TILE_WARPS", TILE_WARPS),
    ("AUGMENT_PIXELS_PER_THREAD", AUGMENT_PIXELS_PER_THREAD),
];

/// Declares integer code enums: the Rust enum and its C declaration, each
/// variant with the name of its C constant.
macro_rules! codes {
    ($(
        $(#[doc = $doc:literal])*
        enum $name:ident {
            $($(#[$attr:meta])* $variant:ident = $value:literal => $c:literal,)*
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            #[repr(i32)]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::NoUninit)]
            pub enum $name {
                $($(#[$attr])* $variant = $value,)*
            }

            // The first code is 0 (asserted), so zeroed memory holds a code.
            const _: () = assert!($name::ALL[0] as i32 == 0);
            // SAFETY: `repr(i32)` with a variant of value 0.
            unsafe impl bytemuck::Zeroable for $name {}

            impl $name {
                /// Every code, in declaration order.
                pub const ALL: &'static [$name] = &[$($name::$variant),*];

                /// The name of the constant in `kernels/abi.h`.
                pub const fn c_name(self) -> &'static str {
                    match self {
                        $($name::$variant => $c,)*
                    }
                }
            }
        )*

        /// The C declarations of every code enum.
        fn code_declarations() -> String {
            let mut out = String::new();
            $(
                let values: Vec<String> =
                    $name::ALL.iter().map(|&code| format!("    {} = {},", code.c_name(), code as i32)).collect();
                out.push_str(&format!("enum {} : int {{\n{}\n}};\n\n", stringify!($name), values.join("\n")));
            )*
            out
        }
    };
}

codes! {
    /// How a timeline's times are given.
    enum TimesMode {
        /// `f64 [L]`, the same for every row.
        #[default]
        Shared = 0 => "TIMES_SHARED",
        /// `f64 [B, L]`, one row of times per batch row.
        PerRow = 1 => "TIMES_PER_ROW",
        /// Sample `i` at `start + i / hz`.
        Uniform = 2 => "TIMES_UNIFORM",
    }

    /// A channel group's interpolation.
    enum Method {
        #[default]
        Linear = 0 => "METHOD_LINEAR",
        Nearest = 1 => "METHOD_NEAREST",
        Previous = 2 => "METHOD_PREVIOUS",
        /// Unit quaternions `(x, y, z, w)`, four channels each.
        Slerp = 3 => "METHOD_SLERP",
    }

    /// Targets outside a row's samples.
    enum BoundaryRule {
        #[default]
        Clamp = 0 => "BOUNDARY_CLAMP",
        Extrapolate = 1 => "BOUNDARY_EXTRAPOLATE",
        /// The fill value (`fill_bits`).
        Fill = 2 => "BOUNDARY_FILL",
    }

    /// The element type of an index tensor (valid lengths, cloud index), or
    /// none.
    enum IndexType {
        #[default]
        None = 0 => "INDEX_NONE",
        U32 = 1 => "INDEX_U32",
        U64 = 2 => "INDEX_U64",
        I32 = 3 => "INDEX_I32",
        I64 = 4 => "INDEX_I64",
    }

    /// An element type, in the order of robocache's `DType`.
    enum DTypeCode {
        #[default]
        Bool = 0 => "DT_BOOL",
        U8 = 1 => "DT_U8",
        U16 = 2 => "DT_U16",
        U32 = 3 => "DT_U32",
        U64 = 4 => "DT_U64",
        I8 = 5 => "DT_I8",
        I16 = 6 => "DT_I16",
        I32 = 7 => "DT_I32",
        I64 = 8 => "DT_I64",
        F16 = 9 => "DT_F16",
        BF16 = 10 => "DT_BF16",
        F32 = 11 => "DT_F32",
        F64 = 12 => "DT_F64",
    }

    /// How a frame's RGB values are laid out.
    enum FrameLayout {
        /// `[H, W, 3]`: channels last, as decoders and LeRobot's images store them.
        #[default]
        Hwc = 0 => "LAYOUT_HWC",
        /// `[3, H, W]`: channels first, as LeRobot's batches and torchvision take them.
        Chw = 1 => "LAYOUT_CHW",
    }

    /// What a voxel grid holds.
    enum VoxelMode {
        #[default]
        Occupancy = 0 => "MODE_OCCUPANCY",
        Count = 1 => "MODE_COUNT",
        Mean = 2 => "MODE_MEAN",
        Max = 3 => "MODE_MAX",
    }

    /// The operation an [`AugmentOp`] applies to a window's frames (the
    /// CPU reference: `robocache_augment::reference`).
    enum AugmentKind {
        /// Nothing: the frame copied.
        #[default]
        Nothing = 0 => "AUG_NOTHING",
        /// `values[0]`: the factor.
        Brightness = 1 => "AUG_BRIGHTNESS",
        /// `values[0]`, `values[1]`: the ratio and `1 - ratio`; the frame's
        /// mean grey from `sums`.
        Contrast = 2 => "AUG_CONTRAST",
        /// `values[0]`, `values[1]`: the ratio and `1 - ratio`.
        Saturation = 3 => "AUG_SATURATION",
        /// `values[0]`: the shift in turns.
        Hue = 4 => "AUG_HUE",
        /// `values[0]`: `1 - factor`.
        Sharpness = 5 => "AUG_SHARPNESS",
        /// `values[0]`: gamma.
        Gamma = 6 => "AUG_GAMMA",
        /// `values[0..6]`: the normalised inverse matrix (theta).
        AffineNearest = 7 => "AUG_AFFINE_NEAREST",
        AffineBilinear = 8 => "AUG_AFFINE_BILINEAR",
        /// `values[0]`, `values[1]`: mean and sigma; `key`: the generator's key.
        Noise = 9 => "AUG_NOISE",
        /// `taps` weights from `weights[key]`, along rows (x).
        BlurRows = 10 => "AUG_BLUR_ROWS",
        /// `taps` weights from `weights[key]`, along columns (y).
        BlurColumns = 11 => "AUG_BLUR_COLUMNS",
    }
}

/// Declares `#[repr(C)]` structs and their C declarations: each field with
/// its Rust type and its C declaration (type and name, arrays included).
macro_rules! structs {
    ($(
        $(#[doc = $doc:literal])*
        struct $name:ident {
            $($(#[doc = $fdoc:literal])* $field:ident: $ty:ty => $c:literal,)*
        }
    )*) => {
        $(
            $(#[doc = $doc])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, bytemuck::Zeroable)]
            pub struct $name {
                $($(#[doc = $fdoc])* pub $field: $ty,)*
            }

            impl $name {
                /// `(field, its C declaration, its Rust size)` in order.
                pub const FIELDS: &'static [(&'static str, &'static str, usize)] =
                    &[$((stringify!($field), $c, size_of::<$ty>())),*];
            }

            impl Default for $name {
                /// Every field zero (null pointers, the codes' first values).
                fn default() -> Self {
                    bytemuck::Zeroable::zeroed()
                }
            }

            // SAFETY: `repr(C)`, every field a parameter type, no field refers to host memory.
            unsafe impl crate::Param for $name {}
        )*

        /// Every struct: `(name, fields, size)`, in declaration order (each
        /// after the structs it contains).
        pub const STRUCTS: &[(&str, &[(&str, &str, usize)], usize)] =
            &[$((stringify!($name), $name::FIELDS, size_of::<$name>())),*];
    };
}

structs! {
    /// One operation of one window's frames (a table `[windows, slots]` in
    /// device memory).
    struct AugmentOp {
        kind: AugmentKind => "int kind",
        /// Blur: the kernel's size.
        taps: u32 => "uint32_t taps",
        values: [f32; 6] => "float values[6]",
        /// Noise: the generator's key; blur: the first weight's index.
        key: u64 => "uint64_t key",
    }

    /// One window's crop and its resize (a table `[windows]`): `width` 0
    /// for none. Output position `x` reads `x_taps` source columns from
    /// `firsts[x_table + x]` (relative to `left`) with weights
    /// `weights[x_weights + x * x_taps ..]`; rows likewise.
    struct AugmentCrop {
        left: u32 => "uint32_t left",
        top: u32 => "uint32_t top",
        width: u32 => "uint32_t width",
        height: u32 => "uint32_t height",
        x_table: u32 => "uint32_t x_table",
        y_table: u32 => "uint32_t y_table",
        x_taps: u32 => "uint32_t x_taps",
        y_taps: u32 => "uint32_t y_taps",
        x_weights: u32 => "uint32_t x_weights",
        y_weights: u32 => "uint32_t y_weights",
    }

    /// One window's part of an augmentation pass (a table `[windows,
    /// passes]`): its operations `first .. first + count` (slots of its
    /// row of the operation table). The first of a later pass may read
    /// neighbours of the previous pass's frame (sharpness, affine, blur) or
    /// its mean grey (contrast); every other one is per pixel.
    struct AugmentStage {
        first: u32 => "uint32_t first",
        count: u32 => "uint32_t count",
        /// 1: the window has this pass.
        active: u32 => "uint32_t active",
        /// 1: the window's last pass, which writes the output; 0: it
        /// writes `work` for the next.
        last: u32 => "uint32_t last",
        /// 1: the next pass starts with a contrast, so this one sums the
        /// grey of what it writes into `sums[pass]`.
        sums_next: u32 => "uint32_t sums_next",
    }

    /// The arguments of `augment_pass`: pass `pass` of every window's
    /// augmentation (the first reads `frames_in` or `sources`, cropped and resized; a
    /// later one `src`, the previous pass's `work`).
    struct AugmentArgs {
        /// The frames `[frames, in_height, in_width, 3]` or `[frames, 3,
        /// in_height, in_width]` of `in_dtype`.
        frames_in: u64 => "const void* frames_in",
        /// `[frames]`, or 0: the address of each frame, u8 `[in_height,
        /// in_width, 3]`, read instead of `frames_in` (the frames a
        /// device frame cache holds, augmented as they are stacked).
        sources: u64 => "const unsigned long long* sources",
        /// The previous pass's frames, `float [frames, height, width, 3]`.
        src: u64 => "const float* src",
        /// This pass's frames for the next, `float [frames, height, width, 3]`.
        work: u64 => "float* work",
        /// The output in `layout` and `out_dtype`.
        out: u64 => "void* out",
        /// `[windows, slots]`.
        ops: u64 => "const AugmentOp* ops",
        /// `[windows, passes]`.
        stages: u64 => "const AugmentStage* stages",
        /// `[windows]`, or 0 without crops.
        crops: u64 => "const AugmentCrop* crops",
        firsts: u64 => "const uint32_t* firsts",
        weights: u64 => "const float* weights",
        /// `[passes, frames]`: fixed-point grey sums (2^-32), zeroed before the first pass.
        sums: u64 => "unsigned long long* sums",
        /// `[listed]`: the frames whose windows have this pass (the grid
        /// covers those only).
        frame_list: u64 => "const uint32_t* frame_list",
        frames: u64 => "uint64_t frames",
        listed: u64 => "uint64_t listed",
        /// Frames of a window.
        steps: u32 => "uint32_t steps",
        slots: u32 => "uint32_t slots",
        pass: u32 => "uint32_t pass",
        passes: u32 => "uint32_t passes",
        in_width: u32 => "uint32_t in_width",
        in_height: u32 => "uint32_t in_height",
        width: u32 => "uint32_t width",
        height: u32 => "uint32_t height",
        layout: FrameLayout => "int layout",
        /// `DT_U8` (levels) or `DT_F32` (`[0, 1]`).
        in_dtype: DTypeCode => "int in_dtype",
        out_dtype: DTypeCode => "int out_dtype",
        pad: i32 => "int pad",
    }

    /// A timeline: explicit `f64` times (shared `[L]` or per row `[B, L]`)
    /// or uniform.
    struct Timeline {
        times: u64 => "const double* times",
        mode: TimesMode => "int mode",
        pad: i32 => "int pad",
        start: f64 => "double start",
        hz: f64 => "double hz",
        /// `L`.
        len: u64 => "uint64_t len",
    }

    /// The arguments every resample kernel shares.
    struct ResampleArgs {
        batch: u64 => "uint64_t batch",
        samples: u64 => "uint64_t samples",
        targets: u64 => "uint64_t targets",
        channels: u64 => "uint64_t channels",
        source: Timeline => "Timeline source",
        target: Timeline => "Timeline target",
        /// Valid lengths `[B]` of `length_type`, or null.
        lengths: u64 => "const void* lengths",
        length_type: IndexType => "int length_type",
        group_count: i32 => "int group_count",
        /// `[group_count][3]`: start, end, [`Method`].
        groups: [i32; 3 * MAX_GROUPS] => "int groups[3 * MAX_GROUPS]",
        boundary: BoundaryRule => "int boundary",
        /// 1 to 4 targets a warp, chosen by the host.
        targets_per_warp: i32 => "int targets_per_warp",
        /// The fill value in the output dtype's bits.
        fill_bits: u64 => "uint64_t fill_bits",
    }

    /// One stream of a fusion.
    struct FusionStream {
        /// `[B, S, D]` of `dtype`.
        data: u64 => "const void* data",
        samples: u64 => "uint64_t samples",
        channels: u64 => "uint64_t channels",
        out_offset: u64 => "uint64_t out_offset",
        source: Timeline => "Timeline source",
        lengths: u64 => "const void* lengths",
        length_type: IndexType => "int length_type",
        dtype: DTypeCode => "int dtype",
        group_count: i32 => "int group_count",
        groups: [i32; 3 * MAX_GROUPS] => "int groups[3 * MAX_GROUPS]",
        boundary: BoundaryRule => "int boundary",
        /// In the stream's dtype.
        fill_bits: u64 => "uint64_t fill_bits",
    }

    /// The arguments of the fusion kernels.
    struct FusionArgs {
        batch: u64 => "uint64_t batch",
        targets: u64 => "uint64_t targets",
        width: u64 => "uint64_t width",
        stream_count: u64 => "uint64_t stream_count",
        target: Timeline => "Timeline target",
        out_dtype: DTypeCode => "int out_dtype",
        targets_per_warp: i32 => "int targets_per_warp",
        /// The streams in device memory when `stream_count > FUSION_INLINE`.
        table: u64 => "const FusionStream* table",
        inline_streams: [FusionStream; FUSION_INLINE] => "FusionStream inline_streams[FUSION_INLINE]",
    }

    /// An episode of a resident stream.
    struct ResidentEpisode {
        /// First row of the episode in the stream's data.
        row_offset: u64 => "uint64_t row_offset",
        /// Rows of the episode (at least 1).
        rows: u64 => "uint64_t rows",
        /// First time of the episode in the stream's times (explicit timelines).
        time_offset: u64 => "uint64_t time_offset",
        /// Uniform timelines: row `i` at `start + i / hz`.
        start: f64 => "double start",
        hz: f64 => "double hz",
        uniform: i32 => "int uniform",
        pad: i32 => "int pad",
    }

    /// A resident stream of a batch assembly.
    struct ResidentStream {
        /// `f32 [rows_total, channels]`.
        data: u64 => "const float* data",
        /// `f64 [rows_total]` explicit times, or null.
        times: u64 => "const double* times",
        /// `[episode_count]`.
        episodes: u64 => "const ResidentEpisode* episodes",
        /// `f32 [batch, targets, channels]`.
        out: u64 => "float* out",
        /// `[batch, targets]`.
        valid: u64 => "uint8_t* valid",
        channels: u64 => "uint64_t channels",
        group_count: i32 => "int group_count",
        groups: [i32; 3 * MAX_GROUPS] => "int groups[3 * MAX_GROUPS]",
        pad: i32 => "int pad",
    }

    /// The arguments of `assemble_windows`.
    struct AssembleArgs {
        batch: u64 => "uint64_t batch",
        targets: u64 => "uint64_t targets",
        episode_count: u64 => "uint64_t episode_count",
        /// `u32 [batch]`.
        sample_episode: u64 => "const uint32_t* sample_episode",
        /// `f64 [batch]`: seconds (time windows) or the anchor step (step windows).
        sample_anchor: u64 => "const double* sample_anchor",
        /// Time windows: the policy rate.
        hz: f64 => "double hz",
        /// Targets before the anchor.
        history: i64 => "long long history",
        step_windows: i32 => "int step_windows",
        /// 1: masks are true where a step is padding (LeRobot's `_is_pad`);
        /// 0: where it is real.
        pad_masks: i32 => "int pad_masks",
        /// Time windows, 1: causal (the host gives every stream one
        /// `Previous` group): a target before the episode's first sample is
        /// padding and zeros, any other is held and valid.
        causal: i32 => "int causal",
        stream_count: u64 => "uint64_t stream_count",
        /// `[stream_count]`.
        streams: u64 => "const ResidentStream* streams",
    }

    /// The arguments of the voxel kernels.
    struct VoxelArgs {
        origin: [f32; 3] => "float origin[3]",
        size: [f32; 3] => "float size[3]",
        dims: [u64; 3] => "uint64_t dims[3]",
        points: u64 => "uint64_t points",
        /// `X * Y * Z`.
        per_cloud: u64 => "uint64_t per_cloud",
        clouds: u64 => "uint64_t clouds",
        cloud_index: u64 => "const void* cloud_index",
        cloud_type: IndexType => "int cloud_type",
        mode: VoxelMode => "int mode",
        feature_len: u64 => "uint64_t feature_len",
    }

    /// The arguments of `yuv420_to_rgb`.
    struct FrameArgs {
        /// `u8 [frames, frame_bytes]`: each frame's Y plane (`width × height`),
        /// then U and V (`⌈width/2⌉ × ⌈height/2⌉` each).
        planes: u64 => "const uint8_t* planes",
        /// `[frames, H, W, 3]` or `[frames, 3, H, W]` of `dtype`.
        out: u64 => "void* out",
        frames: u64 => "uint64_t frames",
        /// Bytes of one frame's planes.
        frame_bytes: u64 => "uint64_t frame_bytes",
        width: u32 => "uint32_t width",
        height: u32 => "uint32_t height",
        layout: FrameLayout => "int layout",
        /// `DT_U8` (levels) or `DT_F32` (levels / 255).
        dtype: DTypeCode => "int dtype",
    }

    /// The arguments of `gather_rgb`: 8-bit RGB frames picked from anywhere
    /// on the device (`sources`: one frame's address each) stacked into one
    /// batch in the output's layout and dtype.
    struct GatherArgs {
        /// `u64 [frames]`: the address of each output frame's source, a
        /// `u8 [height, width, 3]` frame.
        sources: u64 => "const uint64_t* sources",
        /// `[frames, H, W, 3]` or `[frames, 3, H, W]` of `dtype`.
        out: u64 => "void* out",
        frames: u64 => "uint64_t frames",
        /// Pixels of a frame (`width × height`, below 2³²).
        pixels: u32 => "uint32_t pixels",
        /// 4: each thread moves 4 pixels with word loads and vector stores
        /// (`pixels` a multiple of 4, every source 4-byte aligned, `out`
        /// 16-byte aligned); 1: a pixel each.
        pixels_per_thread: u32 => "uint32_t pixels_per_thread",
        layout: FrameLayout => "int layout",
        /// `DT_U8` (levels) or `DT_F32` (levels / 255).
        dtype: DTypeCode => "int dtype",
    }

    /// The arguments of `resize_rows` and `resize_columns`, the two passes of
    /// a frame resize: each output pixel a weighted sum of source pixels
    /// along one axis (`table`: for each output position its first source
    /// position, then the counts, then `taps` weights each); and of
    /// `rgb_layout` (`src`, `out`, `frames`, `in_*`, `layout`, `dtype`).
    struct ResizeArgs {
        /// `u8 [frames, in_rows, in_width, 3]`.
        src: u64 => "const uint8_t* src",
        /// `resize_rows`: `u8 [frames, out_rows, out_width, 3]`;
        /// `resize_columns`: `[frames, out_rows, out_width, 3]` or
        /// `[frames, 3, out_rows, out_width]` of `dtype`.
        out: u64 => "void* out",
        /// `int32 [positions]` first source positions, `[positions]` counts,
        /// `[positions, taps]` weights (22-bit fixed point).
        table: u64 => "const int* table",
        frames: u64 => "uint64_t frames",
        in_width: u32 => "uint32_t in_width",
        in_rows: u32 => "uint32_t in_rows",
        out_width: u32 => "uint32_t out_width",
        out_rows: u32 => "uint32_t out_rows",
        /// Weights kept per output position.
        taps: u32 => "uint32_t taps",
        /// `resize_rows`: the source row of output row 0 (the rows the
        /// vertical pass reads start there); `resize_columns`: 0.
        first_row: u32 => "uint32_t first_row",
        /// `resize_columns` only.
        layout: FrameLayout => "int layout",
        /// `resize_columns` only: `DT_U8` (levels) or `DT_F32` (levels / 255).
        dtype: DTypeCode => "int dtype",
        /// `rgb_layout` only: 4 moves 4 pixels a thread with word loads and
        /// vector stores (the frame a multiple of 4 pixels, `src` 4-byte
        /// aligned, `out` 16-byte aligned); 1: a pixel each.
        pixels_per_thread: u32 => "uint32_t pixels_per_thread",
    }

    /// Point `1 <= k < SLOTS` of voxel `v` at `words[(k - 1) * stride + v]`.
    struct SlotPoints {
        words: u64 => "uint32_t* words",
        stride: u64 => "uint64_t stride",
    }

    /// The voxel mean's lists of points and voxels past their slots.
    struct MeanLists {
        /// Points of slot `SLOTS` and above (at most `n`).
        overflow: u64 => "struct OverflowPoint* overflow",
        counters: u64 => "uint32_t* counters",
        /// Voxels of `SLOTS + 1` to `WARP_POINTS` points.
        warp_voxels: u64 => "struct HeavyVoxel* warp_voxels",
        /// Voxels of more than `WARP_POINTS` points.
        block_voxels: u64 => "struct HeavyVoxel* block_voxels",
        /// Per voxel: its segment (written for heavy voxels only).
        voxel_segments: u64 => "uint32_t* voxel_segments",
        /// The overflow points, by voxel (at most `n`).
        segments: u64 => "uint32_t* segments",
    }
}

// Tables of these are uploaded as bytes (`bytemuck::NoUninit`): checked here
// rather than derived, since the derive cannot see through the macro's types.
// SAFETY (each): `repr(C)`, the fields' sizes add up to the struct's (no
// padding, asserted below), and every field is `NoUninit`.
unsafe impl bytemuck::NoUninit for Timeline {}
unsafe impl bytemuck::NoUninit for AugmentOp {}
unsafe impl bytemuck::NoUninit for AugmentCrop {}
unsafe impl bytemuck::NoUninit for AugmentStage {}
unsafe impl bytemuck::NoUninit for FusionStream {}
unsafe impl bytemuck::NoUninit for ResidentEpisode {}
unsafe impl bytemuck::NoUninit for ResidentStream {}

const fn field_bytes(fields: &[(&str, &str, usize)]) -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < fields.len() {
        total += fields[i].2;
        i += 1;
    }
    total
}

const _: () = {
    assert!(field_bytes(Timeline::FIELDS) == size_of::<Timeline>());
    assert!(field_bytes(AugmentOp::FIELDS) == size_of::<AugmentOp>());
    assert!(field_bytes(AugmentCrop::FIELDS) == size_of::<AugmentCrop>());
    assert!(field_bytes(AugmentStage::FIELDS) == size_of::<AugmentStage>());
    assert!(field_bytes(FusionStream::FIELDS) == size_of::<FusionStream>());
    assert!(field_bytes(ResidentEpisode::FIELDS) == size_of::<ResidentEpisode>());
    assert!(field_bytes(ResidentStream::FIELDS) == size_of::<ResidentStream>());
};

/// The text of `kernels/abi.h`: the constants, code enums and structs above
/// in C.
pub fn c_header() -> String {
    let mut out = String::from(
        "// Generated by `cargo xtask build-ptx` from crates/robocache-kernels/src/abi.rs\n\
         // (the documentation of every name is there). Do not edit.\n\n\
         #pragma once\n\n\
         #include <stdint.h>\n\n",
    );
    for (name, value) in CONSTANTS {
        out.push_str(&format!("#define {name} {value}\n"));
    }
    out.push('\n');
    out.push_str(&code_declarations());
    out.push_str("struct OverflowPoint;\nstruct HeavyVoxel;\n\n");
    for (name, fields, _) in STRUCTS {
        let lines: Vec<String> = fields.iter().map(|(_, c, _)| format!("    {c};")).collect();
        out.push_str(&format!("struct {name} {{\n{}\n}};\n\n", lines.join("\n")));
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_header_is_current() {
        let committed = include_str!("../../../kernels/abi.h");
        assert!(committed == c_header(), "kernels/abi.h is stale: run `cargo xtask build-ptx` and commit");
    }

    /// A C declaration (`uint64_t x`, `int g[3 * MAX_GROUPS]`, `const T* p`)
    /// as its type, its name and its element count (arrays multiplied out).
    fn c_parts(declaration: &str) -> (&str, &str, usize) {
        let (head, dims) = declaration.split_once('[').unwrap_or((declaration, ""));
        let (ty, name) = head.rsplit_once(' ').expect("type and name");
        let count = dims
            .trim_end_matches(']')
            .split('*')
            .filter(|factor| !factor.trim().is_empty())
            .map(|factor| {
                let factor = factor.trim();
                CONSTANTS.iter().find(|(name, _)| *name == factor).map_or_else(|| factor.parse().unwrap(), |c| c.1)
            })
            .product();
        (ty, name, count)
    }

    /// The size of a C declaration's type.
    fn c_size(declaration: &str) -> usize {
        let (ty, _, count) = c_parts(declaration);
        let element = if ty.ends_with('*') {
            8
        } else {
            match ty {
                "int" | "float" | "uint32_t" => 4,
                "uint64_t" | "double" | "long long" => 8,
                other => STRUCTS.iter().find(|s| s.0 == other).unwrap_or_else(|| panic!("unknown C type {other}")).2,
            }
        };
        count * element
    }

    #[test]
    fn every_field_has_the_size_of_its_c_type() {
        for (name, fields, _) in STRUCTS {
            for (field, c, size) in *fields {
                assert_eq!(c_parts(c).1, *field, "{name}.{field}: the C declaration names another field");
                assert_eq!(c_size(c), *size, "{name}.{field}: `{c}` has another size than the Rust field");
            }
        }
    }

    #[test]
    fn c_declarations_parse() {
        assert_eq!(c_parts("int groups[3 * MAX_GROUPS]"), ("int", "groups", 96));
        assert_eq!(c_parts("const double* times"), ("const double*", "times", 1));
        assert_eq!(c_size("long long history"), 8);
        assert_eq!(c_size("FusionStream inline_streams[FUSION_INLINE]"), 16 * 488);
    }

    #[test]
    fn codes_are_distinct_and_dense() {
        for (i, code) in DTypeCode::ALL.iter().enumerate() {
            assert_eq!(*code as i32, i as i32);
        }
        for (i, code) in IndexType::ALL.iter().enumerate() {
            assert_eq!(*code as i32, i as i32);
        }
    }
}
