//! CUDA tooling without a CUDA installation: nvcc from PyPI, PTX generation
//! and its staleness check, the driver loader, and the GPU bundle.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{root, run};

/// The archs PTX is generated for (docs/architecture.md).
pub const ARCHS: [u32; 3] = [80, 90, 120];

/// nvcc 13.0 (PTX ISA 9.0, which driver 580 loads); a newer nvcc emits PTX
/// the 580 driver cannot load, so the pins are exact.
const NVCC_PACKAGES: [&str; 5] = [
    "nvidia-cuda-nvcc==13.0.*",
    "nvidia-cuda-crt==13.0.*",
    "nvidia-cuda-cccl==13.0.*",
    "nvidia-nvvm==13.0.*",
    "nvidia-cuda-runtime==13.0.*",
];

/// The CUDA toolkit root: `CUDA_PATH` when set, else the PyPI packages
/// installed into `target/tools/cuda`.
fn toolkit() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("CUDA_PATH") {
        return Ok(PathBuf::from(path));
    }
    let tools = root().join("target/tools/cuda");
    let toolkit = tools.join("nvidia/cu13");
    if !toolkit.join("bin/nvcc").exists() {
        eprintln!("installing nvcc 13.0 from PyPI into {}", tools.display());
        run(Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
            .arg(&tools)
            .args(NVCC_PACKAGES))?;
    }
    Ok(toolkit)
}

fn kernel_sources() -> Result<Vec<PathBuf>> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root().join("kernels"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    sources.sort();
    Ok(sources)
}

/// Where the PTX of `source` for `arch` is committed.
fn ptx_path(source: &Path, arch: u32) -> PathBuf {
    let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    root().join(format!("crates/robocache-kernels/ptx/sm_{arch}/{stem}.ptx"))
}

/// Compiles every kernel source for every arch; with `check`, compares with
/// the committed PTX instead of writing it.
pub fn build_ptx(check: bool) -> Result<()> {
    abi_header(check)?;
    let toolkit = toolkit()?;
    let nvcc = toolkit.join("bin/nvcc");
    let scratch = root().join("target/ptx");
    std::fs::create_dir_all(&scratch)?;
    let mut stale = Vec::new();
    for source in kernel_sources()? {
        for arch in ARCHS {
            let out =
                scratch.join(format!("sm_{arch}_{}.ptx", source.file_stem().unwrap_or_default().to_string_lossy()));
            run(Command::new(&nvcc)
                .env("PATH", prepend_path(&toolkit.join("bin")))
                // No -lineinfo: it embeds symbol names hashed from the checkout's
                // location, and the committed PTX must not depend on where it was built.
                .args(["-ptx", "-std=c++17", "-O3", "--fmad=false"])
                .arg(format!("-arch=sm_{arch}"))
                .arg("-o")
                .arg(&out)
                .arg(&source))?;
            // Without line info nvcc writes no paths; normalise any that remain.
            let ptx = normalize(&std::fs::read_to_string(&out)?, &toolkit);
            let committed = ptx_path(&source, arch);
            if check {
                if std::fs::read_to_string(&committed).ok().as_deref() != Some(ptx.as_str()) {
                    stale.push(committed);
                }
            } else {
                std::fs::create_dir_all(committed.parent().unwrap_or(&scratch))?;
                std::fs::write(&committed, ptx)?;
            }
        }
    }
    if !stale.is_empty() {
        let list: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        bail!("stale PTX (run `cargo xtask build-ptx` and commit): {}", list.join(", "));
    }
    if check {
        eprintln!("PTX is up to date");
    }
    Ok(())
}

/// Writes (or with `check`, compares) `kernels/abi.h`, the kernels' side of
/// the declarations in `robocache_kernels::abi`.
fn abi_header(check: bool) -> Result<()> {
    let path = root().join("kernels/abi.h");
    let header = robocache_kernels::abi::c_header();
    if check {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(header.as_str()) {
            bail!("stale {} (run `cargo xtask build-ptx` and commit)", path.display());
        }
    } else {
        std::fs::write(&path, header)?;
    }
    Ok(())
}

/// Replaces the toolkit and checkout paths in `.file` directives, so the PTX
/// does not depend on where either lives.
fn normalize(ptx: &str, toolkit: &Path) -> String {
    ptx.replace(&format!("{}/bin/..//include/", toolkit.display()), "cuda/include/")
        .replace(&format!("{}/", root().display()), "")
        .replace("target/tools/cuda/nvidia/cu13/bin/..//include/", "cuda/include/")
}

fn prepend_path(dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(paths).unwrap_or_default()
}

/// Where the generated driver loader is committed.
const DRIVER_LOADER: &str = "crates/robocache-cuda/src/driver_loader.c";

/// Writes (or with `check`, compares) `crates/robocache-cuda/src/driver_loader.c`:
/// for every driver function `cust_raw` declares, an x86-64 trampoline that
/// jumps through a table filled from the real `libcuda.so.1` on first use
/// (`dlopen`), or to a function returning CUDA_ERROR_STUB_LIBRARY (34) where
/// no driver can be loaded. The `driver` feature of robocache-cuda compiles
/// it into every binary, so nothing links `libcuda.so.1` at build time
/// (docs/architecture.md, "Linking the driver").
pub fn driver_loader(check: bool) -> Result<()> {
    let bindings = cust_raw_bindings()?;
    let text = std::fs::read_to_string(&bindings).with_context(|| format!("cannot read {}", bindings.display()))?;
    let mut names: Vec<&str> = text
        .split("pub fn ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .filter(|name| name.starts_with("cu"))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.len() < 100 {
        bail!("found only {} driver functions in {}", names.len(), bindings.display());
    }
    let source = loader_source(&names);
    let path = root().join(DRIVER_LOADER);
    if check {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(source.as_str()) {
            bail!("{DRIVER_LOADER} is stale (run `cargo xtask driver-loader` and commit)");
        }
        eprintln!("{DRIVER_LOADER} is up to date");
    } else {
        std::fs::write(&path, source)?;
    }
    Ok(())
}

fn loader_source(names: &[&str]) -> String {
    let mut c = String::from(
        "/* Generated by `cargo xtask driver-loader` from cust_raw's bindings; do not edit.\n\
         \x20*\n\
         \x20* The CUDA driver, loaded on first use. Every driver function cust_raw\n\
         \x20* declares is a trampoline here: it jumps through `robocache_cuda_table`,\n\
         \x20* whose entries are filled, the first time any trampoline runs, from\n\
         \x20* dlopen(\"libcuda.so.1\") (or, where no driver loads, with a function that\n\
         \x20* returns CUDA_ERROR_STUB_LIBRARY, which the wrapper reports as \"the CUDA\n\
         \x20* driver is not available\"). A tail jump leaves every argument register\n\
         \x20* and the stack as the caller set them, so one trampoline serves every\n\
         \x20* signature; the first call saves the argument registers (integer and\n\
         \x20* vector) around the loader. Binaries built with it run on machines with\n\
         \x20* and without a driver: nothing links libcuda.so.1 at build time.\n\
         \x20*/\n\
         #include <dlfcn.h>\n#include <pthread.h>\n#include <stddef.h>\n\n",
    );
    let _ = writeln!(c, "#define ROBOCACHE_CUDA_FUNCTIONS {}\n", names.len());
    c.push_str("static const char* const robocache_cuda_names[ROBOCACHE_CUDA_FUNCTIONS] = {\n");
    for name in names {
        let _ = writeln!(c, "    \"{name}\",");
    }
    c.push_str(concat!(
        "};\n\n",
        "void* robocache_cuda_table[ROBOCACHE_CUDA_FUNCTIONS] __attribute__((visibility(\"hidden\")));\n",
        "static pthread_once_t robocache_cuda_once = PTHREAD_ONCE_INIT;\n\n",
        "/* CUDA_ERROR_STUB_LIBRARY: no driver could be loaded, or it lacks the function. */\n",
        "static int robocache_cuda_absent(void) { return 34; }\n\n",
        "static void robocache_cuda_fill(void) {\n",
        "    void* driver = dlopen(\"libcuda.so.1\", RTLD_NOW | RTLD_LOCAL);\n",
        "    for (size_t i = 0; i < ROBOCACHE_CUDA_FUNCTIONS; i++) {\n",
        "        void* f = driver ? dlsym(driver, robocache_cuda_names[i]) : NULL;\n",
        "        __atomic_store_n(&robocache_cuda_table[i], f ? f : (void*)robocache_cuda_absent, __ATOMIC_RELEASE);\n",
        "    }\n",
        "}\n\n",
        "/* Called by the trampolines' first-use path (below) with the argument registers saved. */\n",
        "__attribute__((visibility(\"hidden\"))) void robocache_cuda_load(void) {\n",
        "    pthread_once(&robocache_cuda_once, robocache_cuda_fill);\n",
        "}\n\n",
    ));
    c.push_str(TRAMPOLINES_X86_64);
    c.push_str(TRAMPOLINES_AARCH64);
    c.push_str(
        "#else\n#error \"robocache's driver loader has trampolines for x86-64 and aarch64 Linux only\"\n#endif\n\n",
    );
    for (index, name) in names.iter().enumerate() {
        let _ = writeln!(c, "ROBOCACHE_CUDA_TRAMPOLINE({name}, {index});");
    }
    c
}

/// x86-64: `r11` carries the function's byte offset in the table to the
/// first-use path (it is no argument register); the first call saves the
/// integer and vector argument registers around the loader.
const TRAMPOLINES_X86_64: &str = r#"#if defined(__x86_64__) && defined(__linux__)
/* r11 holds the function's byte offset in the table; it is not an argument register. */
__asm__(
    ".text\n"
    ".p2align 4\n"
    "robocache_cuda_first_call:\n"
    "    push %rdi\n    push %rsi\n    push %rdx\n    push %rcx\n    push %r8\n    push %r9\n    push %r11\n"
    "    sub $128, %rsp\n"
    "    movdqu %xmm0, 0(%rsp)\n    movdqu %xmm1, 16(%rsp)\n    movdqu %xmm2, 32(%rsp)\n    movdqu %xmm3, 48(%rsp)\n"
    "    movdqu %xmm4, 64(%rsp)\n    movdqu %xmm5, 80(%rsp)\n    movdqu %xmm6, 96(%rsp)\n    movdqu %xmm7, 112(%rsp)\n"
    "    call robocache_cuda_load\n"
    "    movdqu 0(%rsp), %xmm0\n    movdqu 16(%rsp), %xmm1\n    movdqu 32(%rsp), %xmm2\n    movdqu 48(%rsp), %xmm3\n"
    "    movdqu 64(%rsp), %xmm4\n    movdqu 80(%rsp), %xmm5\n    movdqu 96(%rsp), %xmm6\n    movdqu 112(%rsp), %xmm7\n"
    "    add $128, %rsp\n"
    "    pop %r11\n    pop %r9\n    pop %r8\n    pop %rcx\n    pop %rdx\n    pop %rsi\n    pop %rdi\n"
    "    lea robocache_cuda_table(%rip), %rax\n"
    "    jmp *(%rax,%r11)\n"
);

/* One trampoline per function: the table's entry if filled, else the first-use path. */
#define ROBOCACHE_CUDA_TRAMPOLINE(name, index) __asm__(\
    ".text\n"\
    ".globl " #name "\n"\
    ".type " #name ", @function\n"\
    ".p2align 4\n"\
    #name ":\n"\
    "    mov robocache_cuda_table+8*" #index "(%rip), %rax\n"\
    "    test %rax, %rax\n"\
    "    jz 1f\n"\
    "    jmp *%rax\n"\
    "1:  mov $8*" #index ", %r11d\n"\
    "    jmp robocache_cuda_first_call\n"\
    ".size " #name ", .-" #name "\n")
"#;

/// aarch64 (Jetson Orin, GH200): `x16`/`x17`, the intra-procedure-call
/// scratch registers, are free in a trampoline; `x17` carries the byte
/// offset to the first-use path, which saves `x0`–`x8`, `q0`–`q7` and the
/// frame and link registers around the loader. The table is read with
/// acquire semantics (`ldar`): aarch64 does not order a plain load before
/// the code it branches to.
const TRAMPOLINES_AARCH64: &str = r#"#elif defined(__aarch64__) && defined(__linux__)
/* x17 holds the function's byte offset in the table; x16 and x17 are no argument registers. */
__asm__(
    ".text\n"
    ".p2align 4\n"
    "robocache_cuda_first_call:\n"
    "    stp x29, x30, [sp, #-224]!\n"
    "    mov x29, sp\n"
    "    stp x0, x1, [sp, #16]\n    stp x2, x3, [sp, #32]\n    stp x4, x5, [sp, #48]\n    stp x6, x7, [sp, #64]\n"
    "    stp x8, x17, [sp, #80]\n"
    "    stp q0, q1, [sp, #96]\n    stp q2, q3, [sp, #128]\n    stp q4, q5, [sp, #160]\n    stp q6, q7, [sp, #192]\n"
    "    bl robocache_cuda_load\n"
    "    ldp q0, q1, [sp, #96]\n    ldp q2, q3, [sp, #128]\n    ldp q4, q5, [sp, #160]\n    ldp q6, q7, [sp, #192]\n"
    "    ldp x8, x17, [sp, #80]\n"
    "    ldp x0, x1, [sp, #16]\n    ldp x2, x3, [sp, #32]\n    ldp x4, x5, [sp, #48]\n    ldp x6, x7, [sp, #64]\n"
    "    ldp x29, x30, [sp], #224\n"
    "    adrp x16, robocache_cuda_table\n"
    "    add x16, x16, #:lo12:robocache_cuda_table\n"
    "    ldr x16, [x16, x17]\n"
    "    br x16\n"
);

/* One trampoline per function: the table's entry if filled, else the first-use path. */
#define ROBOCACHE_CUDA_TRAMPOLINE(name, index) __asm__(\
    ".text\n"\
    ".globl " #name "\n"\
    ".type " #name ", %function\n"\
    ".p2align 4\n"\
    #name ":\n"\
    "    adrp x16, robocache_cuda_table+8*" #index "\n"\
    "    add x16, x16, #:lo12:robocache_cuda_table+8*" #index "\n"\
    "    ldar x16, [x16]\n"\
    "    cbz x16, 1f\n"\
    "    br x16\n"\
    "1:  mov x17, #8*" #index "\n"\
    "    b robocache_cuda_first_call\n"\
    ".size " #name ", .-" #name "\n")
"#;

/// `cust_raw`'s bindings in the cargo registry (fetched if needed).
fn cust_raw_bindings() -> Result<PathBuf> {
    run(Command::new(env!("CARGO")).current_dir(root()).args(["fetch", "--quiet"]))?;
    let output = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["metadata", "--format-version", "1", "--all-features"])
        .output()
        .context("cargo metadata")?;
    let metadata = String::from_utf8_lossy(&output.stdout);
    let manifest = metadata
        .split("\"manifest_path\":\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .find(|path| path.contains("/cust_raw-"))
        .context("cust_raw is not in the dependency graph (is robocache-cuda a member?)")?;
    Ok(Path::new(manifest).with_file_name("src/cuda.rs"))
}

/// Integration tests of the bundled crates that never touch a GPU (the
/// module graph test reads the checkout's sources, which the bundle lacks).
const CPU_ONLY_TESTS: [&str; 5] =
    ["test-loader", "test-module_graph", "test-crate_graph", "test-fuzz", "test-nasm_probe"];

/// Tests racecheck cannot follow: under it, the device frame cache's loader
/// test stops with "Internal Sanitizer Error: Detected a failure to track a
/// kernel launch" and never finishes (H200, CUDA 13.0, 2026-11-27; the
/// same with the build before the claim map, and with one loader thread).
/// Its kernels (YUV to RGB, resize, the gather of cached frames) are
/// race-checked by the frame tests beside it (`frames_*`, `yuv_frames_*`).
const RACECHECK_LEFT_OUT: [&str; 1] = ["cuda::device_frame_cache_serves_the_batches_it_would_decode"];

/// robocache-video's integration tests, which read their fixtures from the crate's folder.
const VIDEO_TESTS: [&str; 2] = ["test-h264", "test-fixtures"];

/// Where `run.sh` (in `target/gpu-bundle` of a checkout) runs test binary `test`.
fn test_dir(test: &str) -> &'static str {
    if VIDEO_TESTS.contains(&test) {
        "../../crates/robocache-video"
    } else {
        "."
    }
}

/// Builds the release test and benchmark binaries with the `cuda` feature
/// (the driver loaded on first use) into `target/gpu-bundle`, with `run.sh`.
pub fn gpu_bundle() -> Result<()> {
    let tools = crate::python_tools::PythonTools::ensure()?;
    let bundle = root().join("target/gpu-bundle");
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(&bundle)?;
    // OpenH264's build script looks for NASM once and never reruns: a
    // release build made without NASM on PATH would keep its C-only decoder
    // (about 6× slower) in every binary and wheel built after.
    let mut clean = Command::new(env!("CARGO"));
    clean.current_dir(root()).args(["clean", "--release", "-p", "openh264-sys2"]);
    run(&mut clean)?;
    let mut tests = Command::new(env!("CARGO"));
    tests
        .current_dir(root())
        .args(["test", "--release", "--no-run", "--message-format=json", "-p", "robocache", "-p", "robocache-cuda"])
        .args(["-p", "robocache-video"])
        .args(["--features", "robocache/cuda,robocache/video-asm,robocache-cuda/driver"]);
    tools.apply(&mut tests);
    let output = tests.output().context("cargo test --no-run")?;
    if !output.status.success() {
        bail!("building the GPU tests failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }
    let mut copied = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        // Integration tests only: the libraries' own harnesses hold no GPU tests.
        if !line.contains("\"executable\":\"") || !line.contains("\"kind\":[\"test\"]") {
            continue;
        }
        let Some(path) = line.split("\"executable\":\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        let name = Path::new(path).file_name().unwrap_or_default().to_string_lossy().into_owned();
        let short = format!("test-{}", name.rsplit_once('-').map_or(name.as_str(), |(n, _)| n));
        // CPU-only test binaries stay home: compute-sanitizer fails a binary that never calls CUDA.
        if CPU_ONLY_TESTS.contains(&short.as_str()) {
            continue;
        }
        std::fs::copy(path, bundle.join(&short))?;
        copied.push(short);
    }
    let mut cli = Command::new(env!("CARGO"));
    cli.current_dir(root()).args(["build", "--release", "-p", "robocache-cli", "--features", "cuda"]);
    tools.apply(&mut cli);
    run(&mut cli)?;
    std::fs::copy(root().join("target/release/robocache"), bundle.join("robocache"))?;
    // Debug info and symbols would take the bundle past what travels to a GPU machine.
    for binary in copied.iter().map(String::as_str).chain(["robocache"]) {
        run(Command::new("strip").arg("--strip-all").arg(bundle.join(binary)))?;
    }
    let mut script = String::from(
        "#!/usr/bin/env bash\n# Runs the GPU checks of the bundle: `run.sh [PART...]` with parts tests, \
         sanitize, python, cli, demo, loader, lerobot, lerobot-h264, live, augment, bench, train (default: all).\n\
         set -uo pipefail\ncd \"$(dirname \"$0\")\"\nstatus=0\nOUT=${OUT:-.}\nPARTS=\" ${*:-all} \"\n\
         # On the GPU machine a CUDA test that finds no device fails instead of skipping.\n\
         export ROBOCACHE_REQUIRE_CUDA=1\n\
         want() { [[ $PARTS == *\" all \"* || $PARTS == *\" $1 \"* ]]; }\n./robocache info || status=1\n",
    );
    script.push_str("BUNDLE=$PWD\nif want tests; then\n");
    for test in &copied {
        let dir = test_dir(test);
        let _ = writeln!(
            script,
            "echo \"== {test}\"; (cd {dir} && $BUNDLE/{test} --test-threads 1) 2>&1 | tee $OUT/{test}.log || status=1"
        );
    }
    script.push_str("fi\nif want sanitize; then\n");
    for (tool, skip) in [("memcheck", ""), ("racecheck", "ROBOCACHE_SKIP_CONCURRENT=1 ")] {
        for test in &copied {
            let left_out = if tool == "racecheck" {
                RACECHECK_LEFT_OUT.map(|t| format!(" --skip {t}")).concat()
            } else {
                String::new()
            };
            let _ = writeln!(
                script,
                "echo \"== {tool} {test}\"; (cd {dir} && ROBOCACHE_TEST_CASES=16 ROBOCACHE_UNDER_SANITIZER=1 {skip}compute-sanitizer --tool {tool} --error-exitcode 9 $BUNDLE/{test} --test-threads 1{left_out}) > $OUT/{tool}-{test}.log 2>&1 || {{ status=1; tail -30 $OUT/{tool}-{test}.log; }}; tail -3 $OUT/{tool}-{test}.log",
                dir = test_dir(test)
            );
        }
    }
    // The CLI on both backends, same inputs, byte-identical outputs expected
    // for previous/nearest and within one ulp for linear (compared by NumPy).
    script.push_str("fi\nif want cli; then\n");
    script.push_str(concat!(
        "echo \"== robocache resample: cuda vs cpu\"\n",
        "python3 - <<'PY' || status=1\n",
        "import numpy as np, subprocess, os\n",
        "rng = np.random.default_rng(0)\n",
        "t = 1.7e9 + np.cumsum(rng.uniform(0.001, 0.02, size=(8, 300)), axis=1)\n",
        "np.save('x.npy', rng.standard_normal((8, 300, 13)).astype(np.float32)); np.save('t.npy', t)\n",
        "np.save('q.npy', np.linspace(t.min() - 0.1, t.max() + 0.1, 200))\n",
        "for method in ['linear', 'previous', '0..4:slerp-xyzw,4..13:nearest']:\n",
        "    for backend in ['cpu', 'cuda']:\n",
        "        subprocess.run(['./robocache', 'resample', '--data', 'x.npy', '--times', 't.npy', '--targets', 'q.npy', '--channels', method, '--boundary', 'extrapolate', '--backend', backend, '--output', backend + '.npy'], check=True)\n",
        "    a, b = np.load('cpu.npy'), np.load('cuda.npy')\n",
        "    assert np.array_equal(np.load('cpu.valid.npy'), np.load('cuda.valid.npy'))\n",
        "    ulps = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64)).max()\n",
        "    print(f'{method}: identical={np.array_equal(a, b)} max ulps={ulps}')\n",
        "    assert ulps <= 1\n",
        "PY\n",
    ));
    // The loader end to end: GPU-resident low-dimensional streams (the stall
    // target: batch 256 x 16 targets with a 2 ms step), then with the camera
    // streamed, then the CPU reference for comparison.
    script.push_str("fi\nif want demo; then\n");
    script.push_str(concat!(
        "echo \"== robocache demo\"\n",
        "./robocache demo --backend cuda --batches 1000 --json > $OUT/demo-cuda.json || status=1\n",
        "./robocache demo --backend cuda --batches 1000 || status=1\n",
        "./robocache demo --backend cuda --batches 50 --streams actions,obs/joint_pos,obs/robot0_eef_quat,obs/agentview_image || status=1\n",
        "./robocache demo --backend cpu --batches 200 || status=1\n",
    ));
    // The loader against robomimic's SequenceDataset + DataLoader on the same
    // file: h5py and robomimic come as wheels (the GPU machine has no network).
    script.push_str("fi\nif want loader; then\n");
    script.push_str(concat!(
        "echo \"== loader vs robomimic\"\n",
        "python3 -m pip install --quiet --no-index --no-deps --find-links wheels --target pydeps h5py robomimic tqdm termcolor || status=1\n",
        "./robocache bench loader --keep bench-loader.hdf5 --json $OUT/bench-loader.json || status=1\n",
        "PYTHONPATH=pydeps python3 robomimic_loader.py bench-loader.hdf5 --robocache-json $OUT/bench-loader.json --json $OUT/robomimic-loader.json || status=1\n",
    ));
    // The Python package: its wheel, its tests, pytest as wheels (the GPU
    // machine has no network), run against torch's CUDA tensors there.
    script.push_str(concat!(
        "fi\nif want python; then\n",
        "echo \"== python package\"\n",
        "python3 -m pip install --quiet --no-index --no-deps --find-links wheels --target pydeps-python python/*.whl pytest pluggy iniconfig packaging h5py || status=1\n",
        "[ -f bench-loader.hdf5 ] || ./robocache bench loader --keep bench-loader.hdf5 --batches 5 > /dev/null || status=1\n",
        "PYTHONPATH=pydeps-python python3 -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee $OUT/pytest.log || status=1\n",
        "echo \"== memcheck python GPU tests\"\n",
        "# torch's own kernels are left out of the check (--kernel-name-exclude), which\n",
        "# otherwise takes the run past ten minutes before the first test.\n",
        "PYTHONPATH=pydeps-python CUDA_MODULE_LOADING=LAZY compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name-exclude kns=at:: python3 -m pytest -q -p no:cacheprovider python/tests/test_cuda.py python/tests/test_loader.py::test_cuda_loader_equals_cpu python/tests/test_loader.py::test_cuda_batch_freed_while_torch_reads_it python/tests/test_ops.py::test_groot_loop_as_written -k 'not ordered and not fresh' > $OUT/memcheck-python.log 2>&1 || { status=1; tail -30 $OUT/memcheck-python.log; }; tail -3 $OUT/memcheck-python.log\n",
        "echo \"== python per-call time vs torch\"\n",
        "PYTHONPATH=pydeps-python python3 python_call_overhead.py --json $OUT/python-calls.json || status=1\n",
        "PYTHONPATH=pydeps-python python3 python_call_pieces.py || status=1\n",
        "RUST_JSON=; [ -f $OUT/bench-loader.json ] && RUST_JSON=\"--rust-json $OUT/bench-loader.json\"\n",
        "PYTHONPATH=pydeps-python python3 python_loader.py bench-loader.hdf5 --batches 2000 --profile $RUST_JSON --json $OUT/python-loader.json || status=1\n",
    ));
    // LeRobot's loader against robocache's on a LeRobot root LeRobot writes
    // there (docs/benchmarks.md): LeRobot, PyAV (FFmpeg) and torchcodec come
    // as wheels in `../lerobot-wheels` (`cargo xtask lerobot-wheels`), too
    // large to travel with the rest of the bundle in one call.
    script.push_str(concat!(
        "fi\nlerobot_deps() {\n",
        "# LeRobot, PyAV and torchcodec: from ../lerobot-wheels when it is there, else already\n",
        "# installed in $LEROBOT_DEPS (an earlier call on the same machine). Once per run.\n",
        "DEPS=${LEROBOT_DEPS:-$PWD/pydeps-lerobot}\n",
        "[ -d ffmpeg ] && return\n",
        "if [ -d ../lerobot-wheels ]; then python3 -m pip install --quiet --no-index --no-deps --target $DEPS ../lerobot-wheels/*.whl || status=1; fi\n",
        "python3 -m pip install --quiet --no-index --no-deps --target pydeps-robocache python/*.whl || status=1\n",
        "# torchcodec loads FFmpeg's libraries by their sonames: PyAV's wheel carries them.\n",
        "mkdir -p ffmpeg; for lib in $DEPS/av.libs/lib{avcodec,avdevice,avfilter,avformat,avutil,swresample,swscale}-*; do\n",
        "  name=$(basename $lib); ln -sf $lib ffmpeg/$(echo $name | sed -E 's/-[0-9a-f]+\\.so\\.([0-9]+).*/.so.\\1/'); done\n",
        "export LD_LIBRARY_PATH=$PWD/ffmpeg:$DEPS/av.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n",
        "}\nif want lerobot; then\n",
        "echo \"== LeRobot loader vs robocache\"\n",
        "# The root LeRobot writes is kept in $LEROBOT_ROOT for later calls on the same machine.\n",
        "lerobot_deps; ROOT=${LEROBOT_ROOT:-$PWD/lerobot-av1}\n",
        "[ -d $ROOT ] || PYTHONPATH=$DEPS python3 lerobot_loader.py write $ROOT || status=1\n",
        "PYTHONPATH=pydeps-robocache:$DEPS python3 lerobot_loader.py all $ROOT --json $OUT/lerobot-loader.json || status=1\n",
        "echo \"== training on the LeRobot root: LeRobot's loader vs robocache's, cold and cached\"\n",
        "PYTHONPATH=pydeps-robocache:$DEPS python3 train_policy.py --lerobot-root $ROOT --models small --feeds lerobot-8,lerobot-16,robocache-lerobot-16,robocache-lerobot-cache-16 --out $OUT/train-lerobot || status=1\n",
        "fi\nif want lerobot-h264; then\n",
        "echo \"== LeRobot loader vs robocache, H.264 (libx264) root\"\n",
        "lerobot_deps; ROOT=${LEROBOT_H264_ROOT:-$PWD/lerobot-h264}\n",
        "[ -d $ROOT ] || PYTHONPATH=$DEPS python3 lerobot_loader.py write $ROOT --vcodec h264 || status=1\n",
        "PYTHONPATH=pydeps-robocache:$DEPS python3 lerobot_loader.py all $ROOT --workers 8 16 --backends torchcodec --robocache-workers 16 --video-decoders auto cpu --json $OUT/lerobot-h264.json || status=1\n",
    ));
    // Live windows at deployment against a Python policy server's code, in
    // one process on the same samples (docs/benchmarks.md, "Live windows").
    script.push_str(concat!(
        "fi\nif want live; then\n",
        "echo \"== live windows vs a Python policy server\"\n",
        "python3 -m pip install --quiet --no-index --no-deps --find-links wheels --target pydeps-live python/*.whl h5py || status=1\n",
        "PYTHONPATH=pydeps-live python3 live_windows.py --device cuda:0 --json $OUT/live.json || status=1\n",
    ));
    // Augmentation against LeRobot's CPU transforms, torchvision on the GPU
    // batch and kornia, in one process (docs/benchmarks.md, "Augmentation");
    // then the frame-cache loaders' kernels per batch under PyTorch's profiler.
    script.push_str(concat!(
        "fi\nif want augment; then\n",
        "echo \"== augmentation: robocache vs LeRobot's transforms, torchvision on the batch, kornia\"\n",
        "python3 -m pip install --quiet --no-index --no-deps --find-links wheels --target pydeps-augment python/*.whl h5py kornia kornia_rs || status=1\n",
        "PYTHONPATH=pydeps-augment python3 augment_gpu.py --json $OUT/augment.json || status=1\n",
        "PYTHONPATH=pydeps-augment python3 augment_profile.py --epochs 6 | tee $OUT/augment-profile.txt || status=1\n",
    ));
    // The harness with the PyTorch baseline in the same run (docs/performance.md).
    script.push_str(concat!(
        "fi\nif want bench; then\n",
        "echo \"== robocache bench vs PyTorch\"\n",
        "./robocache bench --backend cuda --baseline torch_baseline.py --out $OUT/bench || status=1\n",
    ));
    // A policy trained on each loader's batches (docs/training.md): one GPU
    // here; `torchrun --nproc_per_node 2 train_policy.py --ddp` on two.
    script.push_str(concat!(
        "fi\nif want train; then\n",
        "echo \"== training: robocache vs robomimic vs synthetic batches\"\n",
        "python3 -m pip install --quiet --no-index --no-deps --find-links wheels --target pydeps-train python/*.whl h5py robomimic tqdm termcolor || status=1\n",
        "PYTHONPATH=pydeps-train python3 train_policy.py --file train-can.hdf5 --out $OUT/train || status=1\n",
        "fi\n",
    ));
    script.push_str("exit $status\n");
    std::fs::copy(root().join("benches/robomimic_loader.py"), bundle.join("robomimic_loader.py"))?;
    std::fs::copy(root().join("benches/python_call_overhead.py"), bundle.join("python_call_overhead.py"))?;
    std::fs::copy(root().join("benches/python_loader.py"), bundle.join("python_loader.py"))?;
    std::fs::copy(root().join("benches/python_call_pieces.py"), bundle.join("python_call_pieces.py"))?;
    std::fs::copy(root().join("benches/train_policy.py"), bundle.join("train_policy.py"))?;
    std::fs::copy(root().join("benches/lerobot_loader.py"), bundle.join("lerobot_loader.py"))?;
    std::fs::copy(root().join("benches/live_windows.py"), bundle.join("live_windows.py"))?;
    std::fs::copy(root().join("benches/augment_gpu.py"), bundle.join("augment_gpu.py"))?;
    std::fs::copy(root().join("benches/augment_profile.py"), bundle.join("augment_profile.py"))?;
    let python = bundle.join("python");
    crate::wheel(&python)?;
    std::fs::create_dir_all(python.join("tests"))?;
    for test in std::fs::read_dir(root().join("crates/robocache-python/tests"))? {
        let test = test?.path();
        if test.extension().is_some_and(|e| e == "py") {
            std::fs::copy(&test, python.join("tests").join(test.file_name().unwrap_or_default()))?;
        }
    }
    std::fs::copy(root().join("benches/torch_baseline.py"), bundle.join("torch_baseline.py"))?;
    bundle_wheels(&tools, &bundle.join("wheels"))?;
    let script_path = bundle.join("run.sh");
    std::fs::write(&script_path, script)?;
    run(Command::new("chmod").arg("+x").arg(&script_path))?;
    eprintln!("bundle: {} ({})", bundle.display(), copied.join(", "));
    Ok(())
}

/// What LeRobot 0.6.1's dataset code needs beyond the GPU machines' image
/// (which has torch, pandas, pyarrow, huggingface-hub): versions pinned to
/// the ones the fixtures were written with.
const LEROBOT_WHEELS: [&str; 14] = [
    "lerobot==0.6.1",
    "datasets==4.8.5",
    "av==15.1.0",
    "torchcodec==0.11.1",
    "draccus==0.11.6",
    "dill==0.4.1",
    "multiprocess==0.70.19",
    "jsonlines==4.0.0",
    "termcolor==3.3.0",
    "toml==0.10.2",
    "mergedeep==1.3.4",
    "gymnasium==1.4.0",
    "farama-notifications==0.0.6",
    "xxhash==4.1.0",
];

/// [`LEROBOT_WHEELS`] for CPython 3.12 on x86-64 Linux into `target/lerobot-wheels`.
pub fn lerobot_wheels() -> Result<()> {
    let tools = crate::python_tools::PythonTools::ensure()?;
    let out = root().join("target/lerobot-wheels");
    std::fs::create_dir_all(&out)?;
    let mut pip = Command::new(tools.bin.join("python"));
    pip.args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:"])
        .args(["--python-version", "3.12", "--implementation", "cp"])
        .args(["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64"])
        .args(["--platform", "manylinux2014_x86_64", "-d"])
        .arg(&out)
        .args(LEROBOT_WHEELS);
    run(&mut pip)?;
    eprintln!("LeRobot wheels: {}", out.display());
    Ok(())
}

/// h5py (for the GPU machines' Python 3.12) and robomimic with
/// the two packages it imports, as wheels from PyPI for an offline install there.
fn bundle_wheels(tools: &crate::python_tools::PythonTools, wheels: &Path) -> Result<()> {
    std::fs::create_dir_all(wheels)?;
    let pip = || {
        let mut pip = Command::new(tools.bin.join("python"));
        pip.args(["-m", "pip", "--quiet", "--disable-pip-version-check"]);
        pip
    };
    run(pip().args(["wheel", "--no-deps", "robomimic==0.3.0", "tqdm", "termcolor", "-w"]).arg(wheels))?;
    run(pip().args(["download", "--no-deps", "pytest", "pluggy", "iniconfig", "packaging", "-d"]).arg(wheels))?;
    // The lent GPU machines run Python 3.12; one h5py wheel keeps the bundle
    // under the 64 MiB that travels with a device call.
    run(pip()
        .args(["download", "--no-deps", "--only-binary=:all:", "--python-version", "312"])
        .args(["--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "h5py==3.14.*", "-d"])
        .arg(wheels))?;
    // kornia, a baseline of the augmentation benchmark (its Rust part for 3.12).
    run(pip()
        .args(["download", "--no-deps", "--only-binary=:all:", "--python-version", "312"])
        .args(["--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "kornia==0.9.*"])
        .args(["kornia_rs==0.2.*", "-d"])
        .arg(wheels))?;
    Ok(())
}
