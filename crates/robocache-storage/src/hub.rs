//! Listing a Hub dataset repository's files, as `huggingface_hub`'s
//! `list_repo_tree` does: `GET {endpoint}/api/datasets/{repo}/tree/{revision}/{path}?recursive=true`,
//! a JSON array of `{"type": "file" | "directory", "path", "size"}`, in
//! pages linked by a `Link: <...>; rel="next"` header.

use serde::Deserialize;

use crate::location::percent_encode;
use crate::stores::HubAccess;
use crate::{Error, Result};

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
}

/// The files below `dir` (repository paths), recursively.
pub(crate) async fn list_files(access: &HubAccess, repo: &str, revision: &str, dir: &str) -> Result<Vec<String>> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .connect_timeout(std::time::Duration::from_secs(5))
        .build()
        .map_err(|e| Error::Hub { url: access.endpoint.clone(), reason: format!("HTTP client: {e}") })?;
    let mut url = format!(
        "{}/api/datasets/{repo}/tree/{}/{}?recursive=true&expand=false",
        access.endpoint,
        percent_encode(revision),
        dir.split('/').map(percent_encode).collect::<Vec<_>>().join("/")
    );
    let mut files = Vec::new();
    for page in 0.. {
        let mut tries = 0;
        let response = loop {
            tries += 1;
            let mut request = client.get(&url);
            if let Some(token) = &access.token {
                request = request.bearer_auth(token);
            }
            match request.send().await {
                Ok(response) if response.status().is_server_error() && tries < 5 => {}
                Ok(response) => break response,
                Err(e) if tries < 5 && (e.is_timeout() || e.is_connect() || e.is_request()) => {}
                Err(e) => return Err(Error::Hub { url: url.clone(), reason: e.to_string() }),
            }
            tokio::time::sleep(std::time::Duration::from_millis(100 << tries)).await;
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return match page {
                0 => Err(Error::NotFound { url }),
                _ => Err(Error::Hub { url, reason: "a later page of the listing is missing (404)".into() }),
            };
        }
        if !status.is_success() {
            let hint = match status.as_u16() {
                401 | 403 => " (a private or gated dataset: set HF_TOKEN, or log in with `hf auth login`)",
                _ => "",
            };
            return Err(Error::Hub { url, reason: format!("the Hub answered {status}{hint}") });
        }
        let next = response
            .headers()
            .get_all("link")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find(|part| part.contains("rel=\"next\""))
            .and_then(|part| Some(part[part.find('<')? + 1..part.find('>')?].to_owned()));
        let body = response.bytes().await.map_err(|e| Error::Hub { url: url.clone(), reason: e.to_string() })?;
        let entries: Vec<Entry> = serde_json::from_slice(&body)
            .map_err(|e| Error::Hub { url: url.clone(), reason: format!("not a tree listing: {e}") })?;
        files.extend(entries.into_iter().filter(|e| e.kind == "file").map(|e| e.path));
        match next {
            Some(next) => url = next,
            None => break,
        }
    }
    Ok(files)
}
