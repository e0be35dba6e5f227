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
//! use robocache_kernels::{Arch, Kernel, Module};
//!
//! let arch = Arch::for_compute_capability(9, 0).unwrap(); // H100
//! assert_eq!(arch, Arch::Sm90);
//! assert_eq!(Kernel::ResampleF32.module(), Module::Resample);
//! assert!(Module::Resample.ptx(arch).contains(".entry resample_f32("));
//! assert!(Arch::for_compute_capability(7, 5).is_none()); // too old
//! ```

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
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 3] = [Module::Resample, Module::Voxelize, Module::Timing];

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
        }
    }
}

/// Declares [`Kernel`], [`Kernel::ALL`], [`Kernel::module`] and [`Kernel::name`]
/// from one list: each kernel once, with its module and its `extern "C"` name.
macro_rules! kernels {
    ($($(#[doc = $doc:literal])* $kernel:ident => $module:ident, $name:literal;)*) => {
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
        }
    };
}

kernels! {
    ResampleF16 => Resample, "resample_f16";
    ResampleBF16 => Resample, "resample_bf16";
    ResampleF32 => Resample, "resample_f32";
    ResampleF64 => Resample, "resample_f64";
    /// The same without slerp (fewer registers, more warps in flight): for
    /// specs of linear, nearest and previous groups only.
    ResampleF16NoSlerp => Resample, "resample_f16_no_slerp";
    ResampleBF16NoSlerp => Resample, "resample_bf16_no_slerp";
    ResampleF32NoSlerp => Resample, "resample_f32_no_slerp";
    ResampleF64NoSlerp => Resample, "resample_f64_no_slerp";
    /// Tiled resample (no slerp, rows and groups aligned to 16-byte words):
    /// resident blocks place the next tile of targets while they move the
    /// words of the current one.
    ResampleTiledF16 => Resample, "resample_tiled_f16";
    ResampleTiledBF16 => Resample, "resample_tiled_bf16";
    ResampleTiledF32 => Resample, "resample_tiled_f32";
    ResampleTiledF64 => Resample, "resample_tiled_f64";
    /// Nearest/previous on 1-byte elements (u8, i8, bool).
    ResampleBits8 => Resample, "resample_bits8";
    ResampleBits16 => Resample, "resample_bits16";
    ResampleBits32 => Resample, "resample_bits32";
    ResampleBits64 => Resample, "resample_bits64";
    /// Validates lengths and times before a resample.
    ResampleCheck => Resample, "resample_check";
    /// K streams of any dtypes onto one timeline, concatenated, in one launch.
    Fuse => Resample, "fuse";
    /// Fusion when no stream has a slerp group.
    FuseNoSlerp => Resample, "fuse_no_slerp";
    /// Tiled fusion (float streams of the output dtype, rows and offsets on
    /// 16-byte words, no slerp), by output dtype: resident blocks place the
    /// next tile of targets in every stream while they move the current one.
    FuseTiledF16 => Resample, "fuse_tiled_f16";
    FuseTiledBF16 => Resample, "fuse_tiled_bf16";
    FuseTiledF32 => Resample, "fuse_tiled_f32";
    FuseTiledF64 => Resample, "fuse_tiled_f64";
    /// Tiled fusion of any float streams (no slerp) through shared memory,
    /// by output dtype.
    FuseStagedF16 => Resample, "fuse_staged_f16";
    FuseStagedBF16 => Resample, "fuse_staged_bf16";
    FuseStagedF32 => Resample, "fuse_staged_f32";
    FuseStagedF64 => Resample, "fuse_staged_f64";
    /// Per point: voxel, dropped count, occupancy/count/max accumulation.
    VoxelScatter => Voxelize, "voxel_scatter";
    /// Fills 32-bit words with a value.
    VoxelFill => Voxelize, "voxel_fill";
    /// Decodes the order-preserving max encoding in place.
    VoxelMaxDecode => Voxelize, "voxel_max_decode";
    /// Mean per voxel in point order, any F (up to four points, from the
    /// slot arrays; lists heavier voxels and hands out their segments).
    VoxelMean => Voxelize, "voxel_mean";
    /// [`Kernel::VoxelMean`] for F = 1, four voxels a thread.
    VoxelMeanF1 => Voxelize, "voxel_mean_f1";
    /// [`Kernel::VoxelMean`] for F = 2, four voxels a thread.
    VoxelMeanF2 => Voxelize, "voxel_mean_f2";
    /// [`Kernel::VoxelMean`] for F = 3, four voxels a thread.
    VoxelMeanF3 => Voxelize, "voxel_mean_f3";
    /// [`Kernel::VoxelMean`] for F = 4 (16-byte aligned features), four
    /// voxels a thread.
    VoxelMeanF4 => Voxelize, "voxel_mean_f4";
    /// Places the points past their voxel's slots into the voxel's segment.
    VoxelPlaceOverflow => Voxelize, "voxel_place_overflow";
    /// Mean of the listed heavier voxels: a warp each up to 32 points, else
    /// a block.
    VoxelMeanHeavy => Voxelize, "voxel_mean_heavy";
    /// First point with an out-of-range cloud index.
    VoxelCheckClouds => Voxelize, "voxel_check_clouds";
    /// The loader's GPU-resident batch assembly (windows of resident episodes).
    AssembleWindows => Resample, "assemble_windows";
    /// Reads a scratch buffer of twice the L2 size (benchmark harnesses).
    EvictCaches => Timing, "evict_caches";
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

    #[test]
    fn arch_selection() {
        assert_eq!(Arch::for_compute_capability(8, 6), Some(Arch::Sm80));
        assert_eq!(Arch::for_compute_capability(8, 9), Some(Arch::Sm80));
        assert_eq!(Arch::for_compute_capability(9, 0), Some(Arch::Sm90));
        assert_eq!(Arch::for_compute_capability(10, 0), Some(Arch::Sm90));
        assert_eq!(Arch::for_compute_capability(12, 0), Some(Arch::Sm120));
        assert_eq!(Arch::for_compute_capability(7, 0), None);
    }
}
