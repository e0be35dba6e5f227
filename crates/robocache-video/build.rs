//! Decides, at build time, whether the decoders get their assembly, and
//! stops a build that asks for it without the tools to make it.
//!
//! - rav1d's assembly is the `asm` feature. On x86-64 it needs NASM; a
//!   build with `asm` and no NASM fails here, naming the command that
//!   installs NASM and the opt-out (docs/architecture.md, "NASM"). On
//!   aarch64 the C compiler assembles it: no NASM.
//! - OpenH264's build script uses its x86-64 assembly when NASM is on PATH
//!   (silently, else C); this script looks the same way and tells the crate
//!   (`cfg(openh264_asm)`), so `decoders()` reports it. On aarch64
//!   OpenH264 always builds its NEON assembly.

#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "build/nasm.rs"]
mod nasm;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/nasm.rs");
    println!("cargo:rerun-if-env-changed=NASM");
    println!("cargo:rustc-check-cfg=cfg(openh264_asm)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let asm = std::env::var_os("CARGO_FEATURE_ASM").is_some();
    match arch.as_str() {
        "x86_64" | "x86" => {
            let nasm_env = std::env::var_os("NASM").map(std::path::PathBuf::from);
            let probe = nasm::probe(nasm_env.as_deref(), std::env::var_os("PATH").as_deref());
            let found = matches!(probe, nasm::Probe::Found { .. });
            if asm && !found {
                eprintln!("\nerror: {}\n", nasm::missing_message(&probe));
                std::process::exit(1);
            }
            if !asm {
                println!(
                    "cargo:warning=robocache-video is built without rav1d's assembly (the `asm` feature): \
                     AV1 decodes about 7x slower on the CPU"
                );
            }
            if found {
                println!("cargo:rustc-cfg=openh264_asm");
            }
        }
        "aarch64" | "arm" => println!("cargo:rustc-cfg=openh264_asm"),
        _ => {}
    }
}
