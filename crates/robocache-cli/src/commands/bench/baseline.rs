//! The PyTorch baseline (`benches/torch_baseline.py`): each workload's
//! inputs and robocache's outputs are exported as `.npy` files with a
//! manifest; the script loads the same inputs onto the same GPU, checks that
//! its results equal robocache's (docs/semantics.md's tolerances), times eager PyTorch and
//! `torch.compile` the way the harness times robocache, and writes JSON.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use robocache::HostVec;
use serde::Deserialize;

use super::workloads::{Inputs, Workload};

/// What the script reports for one workload.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
pub struct BaselineResult {
    pub id: String,
    pub eager_us: Option<f64>,
    pub compile_us: Option<f64>,
    /// "ok", or what differs.
    pub check: String,
    /// Largest difference found, in units of the output's last place (or relative for means).
    pub max_difference: Option<f64>,
    pub torch_version: Option<String>,
}

/// Writes `inputs` and `outputs` of `workload` under `dir/<id>/`.
pub fn export(dir: &Path, workload: &Workload, inputs: &Inputs, outputs: &Inputs) -> Result<()> {
    let dir = dir.join(&workload.id);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let describe = |list: &Inputs| -> Result<serde_json::Value> {
        // A list: the baseline takes the arrays in this order.
        let mut entries = Vec::new();
        for (name, tensor) in list {
            let file = format!("{name}.npy");
            let host = tensor.to_host()?;
            let dtype = host.dtype().to_string();
            // NumPy has no bf16: its bits go as uint16, the manifest says bf16.
            let host = match host {
                HostVec::BF16(v) => HostVec::U16(v.iter().map(|x| x.to_bits()).collect()),
                other => other,
            };
            crate::npy::write(&dir.join(&file), &host, tensor.shape())?;
            entries.push(serde_json::json!({"name": name, "file": file, "dtype": dtype, "shape": tensor.shape()}));
        }
        Ok(serde_json::Value::Array(entries))
    };
    let manifest = serde_json::json!({
        "id": workload.id,
        "name": workload.name,
        "kind": workload.kind,
        "params": workload.params,
        "inputs": describe(inputs)?,
        "outputs": describe(outputs)?,
    });
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&manifest)?)?;
    Ok(())
}

/// Runs the baseline script over every exported workload in `dir`.
pub fn run(
    python: &str,
    script: &Path,
    dir: &Path,
    repeats: usize,
    compile: bool,
) -> Result<HashMap<String, BaselineResult>> {
    let json: PathBuf = dir.join("torch.json");
    let mut command = Command::new(python);
    command.arg(script).arg("--inputs").arg(dir).arg("--json").arg(&json).arg("--repeats").arg(repeats.to_string());
    if !compile {
        command.arg("--no-compile");
    }
    eprintln!("running the PyTorch baseline: {command:?}");
    let status = command.status().with_context(|| format!("cannot run {python} {}", script.display()))?;
    if !status.success() {
        bail!("the PyTorch baseline {} failed ({status})", script.display());
    }
    let text = std::fs::read_to_string(&json).with_context(|| format!("cannot read {}", json.display()))?;
    let results: Vec<BaselineResult> =
        serde_json::from_str(&text).with_context(|| format!("{} is not the baseline's JSON", json.display()))?;
    Ok(results.into_iter().map(|r| (r.id.clone(), r)).collect())
}
