//! Real servers for the remote-dataset tests, started by the tests
//! themselves: nginx (serving a directory with ranged GETs, and laid out as
//! the Hugging Face Hub serves `resolve/` and tree-listing URLs), moto's S3
//! server, and a fault-injecting HTTP proxy.
//!
//! nginx is `ROBOCACHE_NGINX`, else `target/tools/nginx` (Debian's package,
//! unpacked there by `cargo xtask test`), else `nginx` on PATH; moto runs in
//! the project's Python (`ROBOCACHE_PYTHON`, `target/tools/python`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{python, workspace_root};

/// A server process, stopped when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_until_listening(port: u16, child: &mut Child, what: &str) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}) before listening on port {port}");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{what} does not listen on port {port} after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn nginx_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ROBOCACHE_NGINX") {
        return PathBuf::from(path);
    }
    let tools = workspace_root().join("target/tools/nginx/root/usr/sbin/nginx");
    if tools.is_file() {
        return tools;
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).chain([PathBuf::from("/usr/sbin")])
    {
        if dir.join("nginx").is_file() {
            return dir.join("nginx");
        }
    }
    panic!(
        "the remote-dataset tests serve files with nginx: run `cargo xtask test` (it unpacks Debian's nginx into target/tools/nginx) or set ROBOCACHE_NGINX"
    )
}

/// nginx serving `root` on a free port: ranged GETs, ETags, and under
/// `/api/` the JSON files named `__tree.json` (the Hub's tree listings, see [`hub_layout`]).
pub fn nginx(root: &Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "daemon off;\nmaster_process off;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log warn;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n  default_type application/octet-stream;\n  client_body_temp_path {prefix}/body;\n  proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n  server {{\n    listen 127.0.0.1:{port};\n    root {root};\n    location /api/ {{ default_type application/json; try_files $uri/__tree.json =404; }}\n  }}\n}}\n",
        prefix = dir.path().display(),
        root = root.display(),
    );
    let config_path = dir.path().join("nginx.conf");
    std::fs::write(&config_path, config).unwrap();
    let mut child = Command::new(nginx_binary())
        .arg("-p")
        .arg(dir.path())
        .arg("-c")
        .arg(&config_path)
        .arg("-e")
        .arg(dir.path().join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot start nginx");
    wait_until_listening(port, &mut child, "nginx");
    Server { child, port, _dir: dir }
}

/// moto's S3 server on a free port (any bucket, keys `testing`/`testing`).
pub fn moto() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(python())
        .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start moto's server (pip install 'moto[server]' into the project's Python)");
    wait_until_listening(port, &mut child, "moto");
    Server { child, port, _dir: dir }
}

/// The storage options of a moto server.
pub fn s3_options(server: &Server) -> Vec<(String, String)> {
    [
        ("aws_endpoint", server.url()),
        ("aws_allow_http", "true".into()),
        ("aws_access_key_id", "testing".into()),
        ("aws_secret_access_key", "testing".into()),
        ("aws_region", "us-east-1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Uploads every file below `dir` to `s3://bucket/prefix/...` with the
/// benchmarks' uploader (`benches/s3_upload.py`: boto3, which moto brings).
pub fn upload(server: &Server, bucket: &str, dir: &Path, prefix: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/s3_upload.py");
    // A loaded machine (CI's parallel tests) has refused moto's first
    // connection once: the upload is tried three times before it fails.
    let mut failures = Vec::new();
    for attempt in 0..3 {
        let output =
            Command::new(python()).arg(&script).args([&server.url(), bucket]).arg(dir).arg(prefix).output().unwrap();
        if output.status.success() {
            return;
        }
        failures.push(String::from_utf8_lossy(&output.stderr).into_owned());
        std::thread::sleep(Duration::from_millis(500 * (attempt + 1)));
    }
    panic!("upload to moto failed three times; the last: {}", failures.last().cloned().unwrap_or_default());
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files_below(dir: &Path, base: &Path, out: &mut Vec<(String, u64)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            files_below(&entry.path(), base, out);
        } else {
            let relative = entry.path().strip_prefix(base).unwrap().to_string_lossy().into_owned();
            out.push((relative, entry.metadata().unwrap().len()));
        }
    }
}

/// Lays `root` out under `site` as the Hub serves dataset `repo` at
/// `revision`: files at `datasets/<repo>/resolve/<revision>/<path>`, and for
/// every directory its recursive listing (`/api/datasets/<repo>/tree/<revision>/<dir>`,
/// the Hub's JSON) in `__tree.json`.
pub fn hub_layout(site: &Path, repo: &str, revision: &str, root: &Path) {
    copy_tree(root, &site.join(format!("datasets/{repo}/resolve/{revision}")));
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let mut files = Vec::new();
        files_below(&dir, root, &mut files);
        let mut entries: Vec<serde_json::Value> = files
            .iter()
            .map(|(path, size)| serde_json::json!({"type": "file", "oid": "0", "size": size, "path": path}))
            .collect();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                let path = entry.path().strip_prefix(root).unwrap().to_string_lossy().into_owned();
                entries.push(serde_json::json!({"type": "directory", "oid": "0", "size": 0, "path": path}));
                dirs.push(entry.path());
            }
        }
        let relative = dir.strip_prefix(root).unwrap();
        let listing = site.join(format!("api/datasets/{repo}/tree/{revision}")).join(relative).join("__tree.json");
        std::fs::create_dir_all(listing.parent().unwrap()).unwrap();
        std::fs::write(listing, serde_json::to_vec(&entries).unwrap()).unwrap();
    }
}

/// What the proxy does to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward it and its answer.
    Pass,
    /// Answer 500 without asking the server.
    ServerError,
    /// Close the connection without an answer.
    Drop,
    /// Forward the answer's headers and half its body, then close.
    Truncate,
}

/// An HTTP/1.1 proxy in front of `upstream` that applies `plan[n % plan.len()]`
/// to its n-th request. `faults` counts the requests it broke.
pub struct FaultyProxy {
    pub port: u16,
    pub requests: Arc<AtomicUsize>,
    pub faults: Arc<AtomicUsize>,
}

impl FaultyProxy {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

pub fn faulty_proxy(upstream: u16, plan: Vec<Fault>) -> FaultyProxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let faults = Arc::new(AtomicUsize::new(0));
    let (counter, broken) = (requests.clone(), faults.clone());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let (plan, counter, broken) = (plan.clone(), counter.clone(), broken.clone());
            std::thread::spawn(move || {
                let _ = serve(client, upstream, &plan, &counter, &broken);
            });
        }
    });
    FaultyProxy { port, requests, faults }
}

fn serve(
    client: TcpStream,
    upstream: u16,
    plan: &[Fault],
    counter: &AtomicUsize,
    broken: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    loop {
        // One request: its head (GET and HEAD carry no body).
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let end = line == "\r\n";
            if !line.to_ascii_lowercase().starts_with("connection:") {
                head.extend_from_slice(line.as_bytes());
            }
            if end {
                break;
            }
        }
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let fault = plan[n % plan.len()];
        let is_head = head.starts_with(b"HEAD ");
        match fault {
            Fault::ServerError => {
                broken.fetch_add(1, Ordering::SeqCst);
                client.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n")?;
                continue;
            }
            Fault::Drop => {
                broken.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            Fault::Pass | Fault::Truncate => {}
        }
        // Forward with `Connection: close` and read the whole answer.
        let mut server = TcpStream::connect(("127.0.0.1", upstream))?;
        let end = head.len() - 2;
        head.splice(end..end, b"connection: close\r\n".iter().copied());
        server.write_all(&head)?;
        let mut answer = Vec::new();
        server.read_to_end(&mut answer)?;
        let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |p| p + 4);
        let (headers, body) = answer.split_at(split);
        let headers: String = String::from_utf8_lossy(headers)
            .lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
            .map(|l| format!("{l}\r\n"))
            .collect();
        client.write_all(headers.as_bytes())?;
        client.write_all(b"\r\n")?;
        if fault == Fault::Truncate && !is_head && body.len() > 1 {
            broken.fetch_add(1, Ordering::SeqCst);
            client.write_all(&body[..body.len() / 2])?;
            return Ok(());
        }
        client.write_all(body)?;
    }
}
