//! The offsets in `rav1d-arm/src/arm/asm-offsets.h` (the header rav1d
//! 1.1.0's crates.io package leaves out, which its aarch64 assembly
//! includes) against rav1d's own structs: `Dav1dFilmGrainData` is public
//! and measured with `offset_of!`; `AsmRefMvsFrame` is private to rav1d and
//! measured through a mirror of its 1.1.0 definition (`src/refmvs.rs`).
//! A wrong offset would make the aarch64 decoder read the wrong field.

use std::collections::HashMap;
use std::ffi::c_int;
use std::marker::PhantomData;
use std::mem::{offset_of, size_of};

use rav1d::include::dav1d::headers::Dav1dFilmGrainData;

fn header() -> HashMap<String, usize> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/rav1d-arm/src/arm/asm-offsets.h");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define")).then_some(())?;
            let name = words.next()?;
            let value = words.next()?.parse().ok()?;
            Some((name.to_owned(), value))
        })
        .collect()
}

/// rav1d 1.1.0's `AsmRefMvsFrame`, field for field (the pointees do not
/// matter for the layout).
#[allow(dead_code)]
#[repr(C)]
struct AsmRefMvsFrameMirror<'a> {
    lifetime: PhantomData<&'a ()>,
    frm_hdr: *const (),
    iw4: i32,
    ih4: i32,
    iw8: i32,
    ih8: i32,
    sbsz: i32,
    use_ref_frame_mvs: i32,
    sign_bias: [u8; 7],
    mfmv_sign: [u8; 7],
    pocdiff: [i8; 7],
    mfmv_ref: [u8; 3],
    mfmv_ref2cur: [i32; 3],
    mfmv_ref2ref: [[i32; 7]; 3],
    n_mfmvs: i32,
    n_blocks: i32,
    rp: *mut u8,
    rp_ref: *const *mut u8,
    rp_proj: *mut u8,
    rp_stride: isize,
    r: *mut u8,
    n_tile_threads: i32,
    n_frame_threads: i32,
}

#[test]
fn film_grain_offsets_are_rav1d_s() {
    let header = header();
    let expected = [
        ("FGD_SEED", offset_of!(Dav1dFilmGrainData, seed)),
        ("FGD_SCALING_SHIFT", offset_of!(Dav1dFilmGrainData, scaling_shift)),
        ("FGD_AR_COEFF_LAG", offset_of!(Dav1dFilmGrainData, ar_coeff_lag)),
        ("FGD_AR_COEFFS_Y", offset_of!(Dav1dFilmGrainData, ar_coeffs_y)),
        ("FGD_AR_COEFFS_UV", offset_of!(Dav1dFilmGrainData, ar_coeffs_uv)),
        ("FGD_AR_COEFF_SHIFT", offset_of!(Dav1dFilmGrainData, ar_coeff_shift)),
        ("FGD_GRAIN_SCALE_SHIFT", offset_of!(Dav1dFilmGrainData, grain_scale_shift)),
        ("FGD_UV_MULT", offset_of!(Dav1dFilmGrainData, uv_mult)),
        ("FGD_UV_LUMA_MULT", offset_of!(Dav1dFilmGrainData, uv_luma_mult)),
        ("FGD_UV_OFFSET", offset_of!(Dav1dFilmGrainData, uv_offset)),
        ("FGD_CLIP_TO_RESTRICTED_RANGE", offset_of!(Dav1dFilmGrainData, clip_to_restricted_range)),
    ];
    for (name, offset) in expected {
        assert_eq!(header.get(name), Some(&offset), "{name}");
    }
    assert_eq!(size_of::<c_int>(), 4);
}

#[test]
fn reference_motion_offsets_are_rav1d_s() {
    let header = header();
    let expected = [
        ("RMVSF_IW8", offset_of!(AsmRefMvsFrameMirror<'_>, iw8)),
        ("RMVSF_IH8", offset_of!(AsmRefMvsFrameMirror<'_>, ih8)),
        ("RMVSF_MFMV_REF", offset_of!(AsmRefMvsFrameMirror<'_>, mfmv_ref)),
        ("RMVSF_MFMV_REF2CUR", offset_of!(AsmRefMvsFrameMirror<'_>, mfmv_ref2cur)),
        ("RMVSF_MFMV_REF2REF", offset_of!(AsmRefMvsFrameMirror<'_>, mfmv_ref2ref)),
        ("RMVSF_N_MFMVS", offset_of!(AsmRefMvsFrameMirror<'_>, n_mfmvs)),
        ("RMVSF_RP_REF", offset_of!(AsmRefMvsFrameMirror<'_>, rp_ref)),
        ("RMVSF_RP_PROJ", offset_of!(AsmRefMvsFrameMirror<'_>, rp_proj)),
        ("RMVSF_RP_STRIDE", offset_of!(AsmRefMvsFrameMirror<'_>, rp_stride)),
        ("RMVSF_N_TILE_THREADS", offset_of!(AsmRefMvsFrameMirror<'_>, n_tile_threads)),
    ];
    for (name, offset) in expected {
        assert_eq!(header.get(name), Some(&offset), "{name}");
    }
}

#[test]
fn the_mirror_is_rav1d_s_struct_field_for_field() {
    // The mirror above must be rav1d 1.1.0's struct: its field list is
    // compared with the source cargo fetched.
    let source = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))
        .and_then(|home| std::fs::read_dir(home.join("registry/src")).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("rav1d-1.1.0/src/refmvs.rs"))
        .find(|p| p.is_file())
        .expect("rav1d 1.1.0's source in cargo's registry (CARGO_HOME or ~/.cargo): the mirror is checked against it");
    let text = std::fs::read_to_string(&source).unwrap_or_default();
    let start = text.find("pub(crate) struct AsmRefMvsFrame").expect("AsmRefMvsFrame in rav1d's refmvs.rs");
    let body = &text[start..start + text[start..].find("\n}").expect("the struct's end")];
    let fields: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub ").or_else(|| l.trim().strip_prefix("_")))
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .filter(|name| !name.contains(' ') && !name.is_empty())
        .collect();
    assert_eq!(
        fields,
        [
            "lifetime",
            "frm_hdr",
            "iw4",
            "ih4",
            "iw8",
            "ih8",
            "sbsz",
            "use_ref_frame_mvs",
            "sign_bias",
            "mfmv_sign",
            "pocdiff",
            "mfmv_ref",
            "mfmv_ref2cur",
            "mfmv_ref2ref",
            "n_mfmvs",
            "n_blocks",
            "rp",
            "rp_ref",
            "rp_proj",
            "rp_stride",
            "r",
            "n_tile_threads",
            "n_frame_threads"
        ],
        "{}",
        source.display()
    );
}
