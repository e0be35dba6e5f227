//! CUDA tooling without a CUDA installation: nvcc from PyPI, PTX generation
//! and its staleness check, the stub libcuda, and the GPU bundle.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{root, run};

/// The archs PTX is generated for (SPEC §2).
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

/// The stub libcuda: every driver function `cust_raw` declares, returning
/// CUDA_ERROR_STUB_LIBRARY (34). Returns the folder to set as
/// `CUDA_LIBRARY_PATH` (the library is in its `lib64`).
pub fn stub_libcuda() -> Result<PathBuf> {
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
    let mut c = String::from(
        "/* Generated by `cargo xtask stub-libcuda`: every function fails with CUDA_ERROR_STUB_LIBRARY. */\n",
    );
    for name in &names {
        let _ = writeln!(c, "int {name}(void) {{ return 34; }}");
    }
    let dir = root().join("target/tools/libcuda-stub");
    let lib = dir.join("lib64");
    std::fs::create_dir_all(&lib)?;
    let source = dir.join("libcuda_stub.c");
    std::fs::write(&source, c)?;
    run(Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(lib.join("libcuda.so"))
        .arg(&source))?;
    let versioned = lib.join("libcuda.so.1");
    let _ = std::fs::remove_file(&versioned);
    std::os::unix::fs::symlink("libcuda.so", &versioned)?;
    Ok(dir)
}

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

/// Integration tests of the bundled crates that never touch a GPU.
const CPU_ONLY_TESTS: [&str; 1] = ["test-loader"];

/// Builds the release test and benchmark binaries with the `cuda` feature
/// (linked against the stub) into `target/gpu-bundle`, with `run.sh`.
pub fn gpu_bundle() -> Result<()> {
    let stub = stub_libcuda()?;
    let tools = crate::python_tools::PythonTools::ensure()?;
    let bundle = root().join("target/gpu-bundle");
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(&bundle)?;
    let mut tests = Command::new(env!("CARGO"));
    tests
        .current_dir(root())
        .env("CUDA_LIBRARY_PATH", &stub)
        .args(["test", "--release", "--no-run", "--message-format=json", "-p", "robocache", "-p", "robocache-cuda"])
        .args(["--features", "robocache/cuda,robocache-cuda/driver"]);
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
    cli.current_dir(root()).env("CUDA_LIBRARY_PATH", &stub).args([
        "build",
        "--release",
        "-p",
        "robocache-cli",
        "--features",
        "cuda",
    ]);
    tools.apply(&mut cli);
    run(&mut cli)?;
    std::fs::copy(root().join("target/release/robocache"), bundle.join("robocache"))?;
    // Debug info would take the bundle past what travels to a GPU machine.
    for binary in copied.iter().map(String::as_str).chain(["robocache"]) {
        run(Command::new("strip").arg("--strip-debug").arg(bundle.join(binary)))?;
    }
    let mut script = String::from(
        "#!/usr/bin/env bash\n# Runs the GPU checks of the bundle: `run.sh [PART...]` with parts tests, \
         sanitize, buckets, cli, demo, loader, bench (default: all).\n\
         set -uo pipefail\ncd \"$(dirname \"$0\")\"\nstatus=0\nOUT=${OUT:-.}\nPARTS=\" ${*:-all} \"\n\
         want() { [[ $PARTS == *\" all \"* || $PARTS == *\" $1 \"* ]]; }\n./robocache info || status=1\n",
    );
    script.push_str("if want tests; then\n");
    for test in &copied {
        let _ =
            writeln!(script, "echo \"== {test}\"; ./{test} --test-threads 1 2>&1 | tee $OUT/{test}.log || status=1");
    }
    script.push_str("fi\nif want sanitize; then\n");
    for (tool, skip) in [("memcheck", ""), ("racecheck", "ROBOCACHE_SKIP_CONCURRENT=1 ")] {
        for test in &copied {
            let _ = writeln!(
                script,
                "echo \"== {tool} {test}\"; ROBOCACHE_TEST_CASES=16 ROBOCACHE_UNDER_SANITIZER=1 {skip}compute-sanitizer --tool {tool} --error-exitcode 9 ./{test} --test-threads 1 > $OUT/{tool}-{test}.log 2>&1 || {{ status=1; tail -30 $OUT/{tool}-{test}.log; }}; tail -3 $OUT/{tool}-{test}.log"
            );
        }
    }
    // The voxel mean's experimental bucketed pipeline (chosen by an
    // environment variable): the same tests and sanitizers, then both
    // pipelines timed in turn on the voxel workloads.
    script.push_str("fi\nif want buckets; then\n");
    script.push_str(concat!(
        "echo \"== test-backends cuda::voxel, bucketed mean\"; ROBOCACHE_VOXEL_MEAN=buckets ./test-backends --test-threads 1 cuda::voxel 2>&1 | tee $OUT/test-backends-buckets.log || status=1\n",
        "for tool in memcheck racecheck; do echo \"== $tool cuda::voxel, bucketed mean\"; ROBOCACHE_VOXEL_MEAN=buckets ROBOCACHE_TEST_CASES=16 ROBOCACHE_UNDER_SANITIZER=1 ROBOCACHE_SKIP_CONCURRENT=1 compute-sanitizer --tool $tool --error-exitcode 9 ./test-backends --test-threads 1 cuda::voxel > $OUT/$tool-buckets.log 2>&1 || { status=1; tail -30 $OUT/$tool-buckets.log; }; tail -3 $OUT/$tool-buckets.log; done\n",
        "echo \"== voxelize: tallies vs buckets, in turn\"\n",
        "for round in 1 2 3; do for pipeline in tallies buckets; do ROBOCACHE_VOXEL_MEAN=$pipeline ./robocache bench --backend cuda --no-sweep --filter voxelize --out bench-$pipeline-$round > /dev/null || status=1; ",
        "python3 -c \"import json,sys; print(sys.argv[1], ' '.join(f\\\"{r['id']}={r['median_us']:.1f}\\\" for r in json.load(open(sys.argv[2]))['results']))\" $pipeline bench-$pipeline-$round/bench.json; done; done\n",
    ));
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
    // The harness with the PyTorch baseline in the same run (SPEC §7).
    script.push_str(concat!(
        "fi\nif want bench; then\n",
        "echo \"== robocache bench vs PyTorch\"\n",
        "./robocache bench --backend cuda --baseline torch_baseline.py --out $OUT/bench || status=1\n",
        "fi\n",
    ));
    script.push_str("exit $status\n");
    std::fs::copy(root().join("benches/robomimic_loader.py"), bundle.join("robomimic_loader.py"))?;
    std::fs::copy(root().join("benches/torch_baseline.py"), bundle.join("torch_baseline.py"))?;
    bundle_wheels(&tools, &bundle.join("wheels"))?;
    let script_path = bundle.join("run.sh");
    std::fs::write(&script_path, script)?;
    run(Command::new("chmod").arg("+x").arg(&script_path))?;
    eprintln!("bundle: {} ({})", bundle.display(), copied.join(", "));
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
    // The lent GPU machines run Python 3.12; one h5py wheel keeps the bundle
    // under the 64 MiB that travels with a device call.
    run(pip()
        .args(["download", "--no-deps", "--only-binary=:all:", "--python-version", "312"])
        .args(["--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "h5py==3.14.*", "-d"])
        .arg(wheels))?;
    Ok(())
}
