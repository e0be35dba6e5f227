/* Byte offsets of the fields rav1d's aarch64 assembly reads
 * (src/arm/64/filmgrain*.S, src/arm/64/refmvs.S), which include this file
 * as "src/arm/asm-offsets.h". rav1d 1.1.0's crates.io package leaves its
 * own copy out (its manifest excludes "*.h"), so its aarch64 assembly does
 * not build from crates.io; this one is put on the C include path
 * (`CPATH`, .cargo/config.toml) for every build.
 *
 * Worked out from rav1d 1.1.0's #[repr(C)] structs on LP64 targets and
 * checked against them by crates/robocache-video/tests/rav1d_arm_offsets.rs
 * (Dav1dFilmGrainData with offset_of!, AsmRefMvsFrame through a mirror of
 * its definition). Re-check when rav1d is upgraded. */
#ifndef ROBOCACHE_RAV1D_ARM_ASM_OFFSETS_H
#define ROBOCACHE_RAV1D_ARM_ASM_OFFSETS_H

/* Dav1dFilmGrainData */
#define FGD_SEED                         0
#define FGD_SCALING_SHIFT                88
#define FGD_AR_COEFF_LAG                 92
#define FGD_AR_COEFFS_Y                  96
#define FGD_AR_COEFFS_UV                 120
#define FGD_AR_COEFF_SHIFT               176
#define FGD_GRAIN_SCALE_SHIFT            184
#define FGD_UV_MULT                      188
#define FGD_UV_LUMA_MULT                 196
#define FGD_UV_OFFSET                    204
#define FGD_CLIP_TO_RESTRICTED_RANGE     216

/* AsmRefMvsFrame (dav1d's refmvs_frame) */
#define RMVSF_IW8                        16
#define RMVSF_IH8                        20
#define RMVSF_MFMV_REF                   53
#define RMVSF_MFMV_REF2CUR               56
#define RMVSF_MFMV_REF2REF               68
#define RMVSF_N_MFMVS                    152
#define RMVSF_RP_REF                     168
#define RMVSF_RP_PROJ                    176
#define RMVSF_RP_STRIDE                  184
#define RMVSF_N_TILE_THREADS             200

#endif
