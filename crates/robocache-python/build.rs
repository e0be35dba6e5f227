//! Link settings of the extension module.
//!
//! rav1d's assembly (the `video-asm` feature) reaches tables that rav1d
//! defines in Rust with PC-relative relocations, as dav1d's own assembly
//! reaches its hidden C tables. In a shared object those Rust statics are
//! exported and so preemptible, which the linker refuses for such
//! relocations; `-Bsymbolic` binds the module's references to its own
//! definitions (the module exports nothing but its init function anyway).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    }
}
