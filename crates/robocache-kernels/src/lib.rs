//! The PTX kernel catalog of robocache.
//!
//! `kernels/*.cu` are compiled by `cargo xtask build-ptx` (nvcc 13.0, PTX ISA
//! 9.0, `--fmad=false`) for sm_80, sm_90 and sm_120; the PTX is committed
//! under `ptx/sm_*/` and embedded here with `include_str!`, so a build needs
//! no CUDA toolkit. `cargo xtask build-ptx --check` fails when it is stale.
//!
//! A device loads the PTX of the highest arch not above its compute
//! capability ([`Arch::for_compute_capability`]); the driver compiles it to
//! machine code once per context.
//!
//! ```
//! use robocache_kernels::{abi, entry, Arch, Entry, Kernel, Module};
//!
//! let arch = Arch::for_compute_capability(9, 0).unwrap(); // H100
//! assert_eq!(arch, Arch::Sm90);
//! assert_eq!(Kernel::ResampleF32.module(), Module::Resample);
//! assert!(Module::Resample.ptx(arch).contains(".entry resample_f32("));
//! assert!(Arch::for_compute_capability(7, 5).is_none()); // too old
//!
//! // Each kernel's parameters are typed: `entry::ResampleF32` takes
//! // `(data, out, valid, args)`, checked against the PTX by a test.
//! let entry: Entry<(u64, u64, u64, abi::ResampleArgs)> = entry::ResampleF32;
//! assert_eq!(entry.kernel().parameters()[3].size, size_of::<abi::ResampleArgs>());
//! ```

pub mod abi;

use std::ffi::c_void;
use std::marker::PhantomData;

use abi::{
    AssembleArgs, AugmentArgs, FrameArgs, FusionArgs, GatherArgs, MeanLists, ResampleArgs, ResizeArgs, SlotPoints,
    VoxelArgs,
};

/// A PTX target architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// Ampere (A100).
    Sm80,
    /// Hopper (H100, H200).
    Sm90,
    /// Blackwell consumer and workstation parts.
    Sm120,
}

impl Arch {
    /// Every arch with committed PTX, oldest first.
    pub const ALL: [Arch; 3] = [Arch::Sm80, Arch::Sm90, Arch::Sm120];

    /// `(major, minor)` of the arch.
    pub const fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm80 => (8, 0),
            Arch::Sm90 => (9, 0),
            Arch::Sm120 => (12, 0),
        }
    }

    /// The name nvcc uses, `sm_90`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90 => "sm_90",
            Arch::Sm120 => "sm_120",
        }
    }

    /// The highest arch not above the device's compute capability, or `None`
    /// for devices older than sm_80.
    pub fn for_compute_capability(major: u32, minor: u32) -> Option<Arch> {
        Arch::ALL.into_iter().rev().find(|arch| arch.compute_capability() <= (major, minor))
    }
}

/// A PTX module: one per kernel source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// `kernels/resample.cu`: resample, fusion, and their data check.
    Resample,
    /// `kernels/voxelize.cu`.
    Voxelize,
    /// `kernels/timing.cu`: cache eviction for benchmark harnesses.
    Timing,
    /// `kernels/video.cu`: decoded camera frames to RGB.
    Video,
    /// `kernels/augment.cu`: per-sample augmentation of camera frames.
    Augment,
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 5] = [Module::Resample, Module::Voxelize, Module::Timing, Module::Video, Module::Augment];

    /// The PTX text of this module for `arch`.
    pub fn ptx(self, arch: Arch) -> &'static str {
        match (self, arch) {
            (Module::Resample, Arch::Sm80) => include_str!("../ptx/sm_80/resample.ptx"),
            (Module::Resample, Arch::Sm90) => include_str!("../ptx/sm_90/resample.ptx"),
            (Module::Resample, Arch::Sm120) => include_str!("../ptx/sm_120/resample.ptx"),
            (Module::Voxelize, Arch::Sm80) => include_str!("../ptx/sm_80/voxelize.ptx"),
            (Module::Voxelize, Arch::Sm90) => include_str!("../ptx/sm_90/voxelize.ptx"),
            (Module::Voxelize, Arch::Sm120) => include_str!("../ptx/sm_120/voxelize.ptx"),
            (Module::Timing, Arch::Sm80) => include_str!("../ptx/sm_80/timing.ptx"),
            (Module::Timing, Arch::Sm90) => include_str!("../ptx/sm_90/timing.ptx"),
            (Module::Timing, Arch::Sm120) => include_str!("../ptx/sm_120/timing.ptx"),
            (Module::Video, Arch::Sm80) => include_str!("../ptx/sm_80/video.ptx"),
            (Module::Video, Arch::Sm90) => include_str!("../ptx/sm_90/video.ptx"),
            (Module::Video, Arch::Sm120) => include_str!("../ptx/sm_120/video.ptx"),
            (Module::Augment, Arch::Sm80) => include_str!("../ptx/sm_80/augment.ptx"),
            (Module::Augment, Arch::Sm90) => include_str!("../ptx/sm_90/augment.ptx"),
            (Module::Augment, Arch::Sm120) => include_str!("../ptx/sm_120/augment.ptx"),
        }
    }
}

/// A value a kernel takes as a parameter, passed by copying its bytes.
///
/// # Safety
///
/// The type's layout is the one of the kernel parameter it stands for
/// (`repr(C)` structs of [`abi`], integers, floats; device pointers as `u64`).
pub unsafe trait Param: Copy + 'static {}

// SAFETY: plain integers and floats, as the PTX's `.u32`, `.u64`, `.s32`, `.f64`.
unsafe impl Param for u32 {}
// SAFETY: as above.
unsafe impl Param for u64 {}
// SAFETY: as above.
unsafe impl Param for i32 {}
// SAFETY: as above.
unsafe impl Param for f64 {}

/// The size and alignment of one kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    pub size: usize,
    pub align: usize,
}

impl ParamLayout {
    /// The layout of `T`.
    pub const fn of<T>() -> Self {
        ParamLayout { size: size_of::<T>(), align: align_of::<T>() }
    }
}

/// A kernel's parameter list: a tuple of [`Param`]s in the kernel's order.
pub trait Params: Copy {
    /// Each parameter's layout.
    const LAYOUT: &'static [ParamLayout];

    /// Calls `f` with a pointer to each parameter (what `cuLaunchKernel`
    /// takes).
    fn with_pointers<R>(&mut self, f: impl FnOnce(&[*mut c_void]) -> R) -> R;
}

macro_rules! tuple_params {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Param),+> Params for ($($t,)+) {
            const LAYOUT: &'static [ParamLayout] = &[$(ParamLayout::of::<$t>()),+];

            fn with_pointers<R>(&mut self, f: impl FnOnce(&[*mut c_void]) -> R) -> R {
                f(&[$((&mut self.$i as *mut $t).cast()),+])
            }
        }
    };
}

tuple_params!(A 0);
tuple_params!(A 0, B 1);
tuple_params!(A 0, B 1, C 2);
tuple_params!(A 0, B 1, C 2, D 3);
tuple_params!(A 0, B 1, C 2, D 3, E 4);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_params!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);

/// A kernel with the types of its parameters: launching it takes exactly
/// these ([`entry`] has one for every kernel).
pub struct Entry<P> {
    kernel: Kernel,
    params: PhantomData<fn(P)>,
}

impl<P> Clone for Entry<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Entry<P> {}

impl<P> std::fmt::Debug for Entry<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entry({})", self.kernel.name())
    }
}

impl<P: Params> Entry<P> {
    const fn new(kernel: Kernel) -> Self {
        Entry { kernel, params: PhantomData }
    }
}

impl<P> Entry<P> {
    /// The kernel.
    pub const fn kernel(self) -> Kernel {
        self.kernel
    }
}

/// Declares [`Kernel`], [`Kernel::ALL`], [`Kernel::module`], [`Kernel::name`],
/// [`Kernel::parameters`] and the typed [`entry`] of each kernel from one
/// list: each kernel once, with its module, its `extern "C"` name and its
/// parameter types.
macro_rules! kernels {
    ($($(#[doc = $doc:literal])* $kernel:ident => $module:ident, $name:literal, $params:ty;)*) => {
        /// A kernel entry point.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Kernel {
            $($(#[doc = $doc])* $kernel,)*
        }

        impl Kernel {
            /// Every kernel, in declaration order.
            pub const ALL: &'static [Kernel] = &[$(Kernel::$kernel),*];

            /// The module that holds it.
            pub const fn module(self) -> Module {
                match self {
                    $(Kernel::$kernel => Module::$module,)*
                }
            }

            /// Its `extern "C"` name in the PTX.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Kernel::$kernel => $name,)*
                }
            }

            /// The layout of each of its parameters, as its [`entry`] declares them.
            pub const fn parameters(self) -> &'static [ParamLayout] {
                match self {
                    $(Kernel::$kernel => <$params as Params>::LAYOUT,)*
                }
            }
        }

        /// Every kernel with its parameter types (device pointers are `u64`).
        #[allow(non_upper_case_globals)]
        pub mod entry {
            use super::*;

            $($(#[doc = $doc])* pub const $kernel: Entry<$params> = Entry::new(Kernel::$kernel);)*
        }
    };
}

/// `(data, out, valid, args)`.
pub type ResampleParams = (u64, u64, u64, ResampleArgs);
/// `(data, out, valid, tile, args)`.
pub type ResampleTiledParams = (u64, u64, u64, i32, ResampleArgs);
/// `(out, valid, args)`.
pub type FuseParams = (u64, u64, FusionArgs);
/// `(out, valid, tile, args)`.
pub type FuseTiledParams = (u64, u64, i32, FusionArgs);
/// `(features, tallies, counts, slots, mean, voxels, lists)`.
pub type VoxelMeanGroupedParams = (u64, u64, u64, SlotPoints, u64, u64, MeanLists);

kernels! {
    ResampleF16 => Resample, "resample_f16", ResampleParams;
    ResampleBF16 => Resample, "resample_bf16", ResampleParams;
    ResampleF32 => Resample, "resample_f32", ResampleParams;
    ResampleF64 => Resample, "resample_f64", ResampleParams;
    /// The same without slerp (fewer registers, more warps in flight): for
    /// specs of linear, nearest and previous groups only.
    ResampleF16NoSlerp => Resample, "resample_f16_no_slerp", ResampleParams;
    ResampleBF16NoSlerp => Resample, "resample_bf16_no_slerp", ResampleParams;
    ResampleF32NoSlerp => Resample, "resample_f32_no_slerp", ResampleParams;
    ResampleF64NoSlerp => Resample, "resample_f64_no_slerp", ResampleParams;
    /// Tiled resample (no slerp, rows and groups aligned to 16-byte words):
    /// resident blocks place the next tile of targets while they move the
    /// words of the current one.
    ResampleTiledF16 => Resample, "resample_tiled_f16", ResampleTiledParams;
    ResampleTiledBF16 => Resample, "resample_tiled_bf16", ResampleTiledParams;
    ResampleTiledF32 => Resample, "resample_tiled_f32", ResampleTiledParams;
    ResampleTiledF64 => Resample, "resample_tiled_f64", ResampleTiledParams;
    /// Nearest/previous on 1-byte elements (u8, i8, bool).
    ResampleBits8 => Resample, "resample_bits8", ResampleParams;
    ResampleBits16 => Resample, "resample_bits16", ResampleParams;
    ResampleBits32 => Resample, "resample_bits32", ResampleParams;
    ResampleBits64 => Resample, "resample_bits64", ResampleParams;
    /// Validates lengths and times before a resample: `(args, status)`.
    ResampleCheck => Resample, "resample_check", (ResampleArgs, u64);
    /// K streams of any dtypes onto one timeline, concatenated, in one launch.
    Fuse => Resample, "fuse", FuseParams;
    /// Fusion when no stream has a slerp group.
    FuseNoSlerp => Resample, "fuse_no_slerp", FuseParams;
    /// Tiled fusion (float streams of the output dtype, rows and offsets on
    /// 16-byte words, no slerp), by output dtype: resident blocks place the
    /// next tile of targets in every stream while they move the current one.
    FuseTiledF16 => Resample, "fuse_tiled_f16", FuseTiledParams;
    FuseTiledBF16 => Resample, "fuse_tiled_bf16", FuseTiledParams;
    FuseTiledF32 => Resample, "fuse_tiled_f32", FuseTiledParams;
    FuseTiledF64 => Resample, "fuse_tiled_f64", FuseTiledParams;
    /// Tiled fusion of any float streams (no slerp) through shared memory,
    /// by output dtype.
    FuseStagedF16 => Resample, "fuse_staged_f16", FuseTiledParams;
    FuseStagedBF16 => Resample, "fuse_staged_bf16", FuseTiledParams;
    FuseStagedF32 => Resample, "fuse_staged_f32", FuseTiledParams;
    FuseStagedF64 => Resample, "fuse_staged_f64", FuseTiledParams;
    /// Per point: voxel, dropped count, occupancy/count/max accumulation:
    /// `(points, features, grid, counts, tallies, slots, lists, dropped, args)`.
    VoxelScatter => Voxelize, "voxel_scatter", (u64, u64, u64, u64, u64, SlotPoints, MeanLists, u64, VoxelArgs);
    /// Fills 32-bit words with a value: `(words, value, n)`.
    VoxelFill => Voxelize, "voxel_fill", (u64, u32, u64);
    /// Decodes the order-preserving max encoding in place: `(words, n)`.
    VoxelMaxDecode => Voxelize, "voxel_max_decode", (u64, u64);
    /// Mean per voxel in point order, any F (up to four points, from the
    /// slot arrays; lists heavier voxels and hands out their segments):
    /// `(features, tallies, counts, slots, mean, voxels, feature_len, lists)`.
    VoxelMean => Voxelize, "voxel_mean", (u64, u64, u64, SlotPoints, u64, u64, u64, MeanLists);
    /// [`Kernel::VoxelMean`] for F = 1, four voxels a thread.
    VoxelMeanF1 => Voxelize, "voxel_mean_f1", VoxelMeanGroupedParams;
    /// [`Kernel::VoxelMean`] for F = 2, four voxels a thread.
    VoxelMeanF2 => Voxelize, "voxel_mean_f2", VoxelMeanGroupedParams;
    /// [`Kernel::VoxelMean`] for F = 3, four voxels a thread.
    VoxelMeanF3 => Voxelize, "voxel_mean_f3", VoxelMeanGroupedParams;
    /// [`Kernel::VoxelMean`] for F = 4 (16-byte aligned features), four
    /// voxels a thread.
    VoxelMeanF4 => Voxelize, "voxel_mean_f4", VoxelMeanGroupedParams;
    /// Places the points past their voxel's slots into the voxel's segment.
    VoxelPlaceOverflow => Voxelize, "voxel_place_overflow", (MeanLists,);
    /// Mean of the listed heavier voxels: a warp each up to 32 points, else
    /// a block: `(features, slots, lists, mean, points, args, dropped)`.
    VoxelMeanHeavy => Voxelize, "voxel_mean_heavy", (u64, SlotPoints, MeanLists, u64, u64, VoxelArgs, u64);
    /// First point with an out-of-range cloud index: `(args, first_bad)`.
    VoxelCheckClouds => Voxelize, "voxel_check_clouds", (VoxelArgs, u64);
    /// The loader's GPU-resident batch assembly (windows of resident episodes).
    AssembleWindows => Resample, "assemble_windows", (AssembleArgs,);
    /// Flips bool masks in place (valid to padding): `(mask, n)`.
    FlipMasks => Resample, "flip_masks", (u64, u64);
    /// Blocks of rows copied between device buffers in one launch:
    /// `(table, blocks, parts)`, six `u64` a block in `table` (source,
    /// destination, rows, row bytes, source pitch, destination pitch), each
    /// block copied by `parts` thread blocks.
    CopyRowBlocks => Resample, "copy_row_blocks", (u64, u64, u64);
    /// Reads a scratch buffer of twice the L2 size (benchmark harnesses):
    /// `(scratch, count, sink)`.
    EvictCaches => Timing, "evict_caches", (u64, u64, u64);
    /// YUV 4:2:0 frames to RGB, u8 or f32, channels last or first, as
    /// swscale converts them: `(args,)`.
    Yuv420ToRgb => Video, "yuv420_to_rgb", (FrameArgs,);
    /// The horizontal pass of a frame resize, u8 to u8: `(args,)`.
    ResizeRows => Video, "resize_rows", (ResizeArgs,);
    /// The vertical pass of a frame resize, into the output's layout and
    /// dtype: `(args,)`.
    ResizeColumns => Video, "resize_columns", (ResizeArgs,);
    /// RGB frames in another layout and dtype, not resized: `(args,)`.
    RgbLayout => Video, "rgb_layout", (ResizeArgs,);
    /// RGB frames from a table of addresses stacked into one batch, in its
    /// layout and dtype: `(args,)`.
    GatherRgb => Video, "gather_rgb", (GatherArgs,);
    /// Pass `pass` of every window's augmentation: the frames read (the
    /// first), a run of operations, the output or the next pass's frames
    /// written.
    AugmentPass => Augment, "augment_pass", (AugmentArgs,);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_in_every_arch_of_its_module() {
        for arch in Arch::ALL {
            for &kernel in Kernel::ALL {
                let ptx = kernel.module().ptx(arch);
                assert!(ptx.contains(&format!(".entry {}(", kernel.name())), "{} {}", arch.name(), kernel.name());
                assert!(ptx.contains(&format!(".target {}", arch.name())));
                assert!(ptx.contains(".version 9.0"), "PTX ISA 9.0 (nvcc 13.0), which driver 580 loads");
            }
        }
    }

    /// Each parameter of a `.entry` in PTX: `.param .u64 name` or
    /// `.param .align 8 .b8 name[528]`, as a layout.
    fn ptx_parameters(ptx: &str, name: &str) -> Vec<ParamLayout> {
        let start = ptx.find(&format!(".entry {name}(")).expect("entry") + name.len() + 8;
        let list = &ptx[start..start + ptx[start..].find(')').expect("parameter list")];
        list.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let words: Vec<&str> = p.split_whitespace().collect();
                assert_eq!(words[0], ".param", "{name}: {p}");
                match words[1] {
                    ".u64" | ".s64" | ".f64" | ".b64" => ParamLayout { size: 8, align: 8 },
                    ".u32" | ".s32" | ".f32" | ".b32" => ParamLayout { size: 4, align: 4 },
                    ".align" => {
                        let align = words[2].parse().expect("alignment");
                        assert_eq!(words[3], ".b8", "{name}: {p}");
                        let size = words[4].split_once('[').expect("bytes").1.trim_end_matches(']');
                        ParamLayout { size: size.parse().expect("size"), align }
                    }
                    other => panic!("{name}: parameter type {other} in `{p}`"),
                }
            })
            .collect()
    }

    #[test]
    fn every_entry_takes_the_parameters_rust_passes() {
        for arch in Arch::ALL {
            for &kernel in Kernel::ALL {
                let ptx = ptx_parameters(kernel.module().ptx(arch), kernel.name());
                assert_eq!(ptx, kernel.parameters(), "{} on {}: PTX against Rust", kernel.name(), arch.name());
            }
        }
    }

    #[test]
    fn the_ptx_parser_reads_aggregates_and_scalars() {
        let ptx = ".visible .entry k(\n\t.param .u64 k_param_0,\n\t.param .u32 k_param_1,\n\t.param .align 8 .b8 k_param_2[528]\n)";
        assert_eq!(
            ptx_parameters(ptx, "k"),
            [ParamLayout { size: 8, align: 8 }, ParamLayout { size: 4, align: 4 }, ParamLayout { size: 528, align: 8 }]
        );
    }

    #[test]
    fn arch_selection() {
        assert_eq!(Arch::for_compute_capability(8, 6), Some(Arch::Sm80));
        // Jetson Orin (8.7) and Ada (8.9: L4, L40S, RTX 40) JIT sm_80's PTX.
        assert_eq!(Arch::for_compute_capability(8, 7), Some(Arch::Sm80));
        assert_eq!(Arch::for_compute_capability(8, 9), Some(Arch::Sm80));
        // GH200 and H100/H200 (9.0) have their own.
        assert_eq!(Arch::for_compute_capability(9, 0), Some(Arch::Sm90));
        assert_eq!(Arch::for_compute_capability(10, 0), Some(Arch::Sm90));
        assert_eq!(Arch::for_compute_capability(12, 0), Some(Arch::Sm120));
        assert_eq!(Arch::for_compute_capability(7, 0), None);
    }
}
