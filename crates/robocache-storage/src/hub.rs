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
    let mut seen = std::collections::HashSet::new();
    for page in 0.. {
        // A page links the next; a link back to a page seen is a loop.
        if !seen.insert(url.clone()) {
            return Err(Error::Hub { url, reason: "the listing's `Link: rel=\"next\"` repeats a page".into() });
        }
        // A page is fetched whole, retried on a server error, a dropped
        // connection or a body cut short.
        let mut tries = 0;
        let (status, next, body) = loop {
            tries += 1;
            let mut request = client.get(&url);
            if let Some(token) = &access.token {
                request = request.bearer_auth(token);
            }
            let response = match request.send().await {
                Ok(response) if response.status().is_server_error() && tries < 5 => None,
                Ok(response) => Some(response),
                Err(e) if tries < 5 && (e.is_timeout() || e.is_connect() || e.is_request()) => None,
                Err(e) => return Err(Error::Hub { url: url.clone(), reason: e.to_string() }),
            };
            if let Some(response) = response {
                let status = response.status();
                let next = response
                    .headers()
                    .get_all("link")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .flat_map(|v| v.split(','))
                    .find(|part| part.contains("rel=\"next\""))
                    .and_then(|part| Some(part[part.find('<')? + 1..part.find('>')?].to_owned()));
                match response.bytes().await {
                    Ok(body) => break (status, next, body),
                    Err(e) if tries >= 5 => return Err(Error::Hub { url: url.clone(), reason: e.to_string() }),
                    Err(_) => {}
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100 << tries)).await;
        };
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
        let entries: Vec<Entry> = serde_json::from_slice(&body)
            .map_err(|e| Error::Hub { url: url.clone(), reason: format!("not a tree listing: {e}") })?;
        files.extend(entries.into_iter().filter(|e| e.kind == "file").map(|e| e.path));
        match next {
            // The token goes to the Hub's own host only: a next page elsewhere is an error.
            Some(next) if same_origin(&next, &access.endpoint) => url = next,
            Some(next) => {
                return Err(Error::Hub {
                    url,
                    reason: format!(
                        "the listing's next page `{next}` is not on the Hub's host `{}`: not followed",
                        access.endpoint
                    ),
                })
            }
            None => break,
        }
    }
    Ok(files)
}

/// True when `url` has `endpoint`'s scheme, host and port (the endpoint's
/// path may be a prefix, as a proxied Hub's is).
fn same_origin(url: &str, endpoint: &str) -> bool {
    let origin = |text: &str| -> Option<String> {
        let (scheme, rest) = text.split_once("://")?;
        let authority = rest.split(['/', '?', '#']).next()?;
        // Userinfo (`user@host`) would let a page name another host after `@`.
        (!authority.contains('@'))
            .then(|| format!("{}://{}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase()))
    };
    matches!((origin(url), origin(endpoint)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::same_origin;

    #[test]
    fn next_pages_are_followed_only_on_the_hubs_own_host() {
        let hub = "https://huggingface.co";
        assert!(same_origin("https://huggingface.co/api/datasets/a/b/tree/main?cursor=x", hub));
        assert!(same_origin("HTTPS://HuggingFace.co/api/x", hub));
        assert!(!same_origin("https://huggingface.co.evil.example/api/x", hub));
        assert!(!same_origin("http://huggingface.co/api/x", hub));
        assert!(!same_origin("https://huggingface.co@evil.example/api/x", hub));
        assert!(!same_origin("https://evil.example/?https://huggingface.co", hub));
        assert!(same_origin("http://127.0.0.1:8080/api/x", "http://127.0.0.1:8080/hub"));
        assert!(!same_origin("http://127.0.0.1:8081/api/x", "http://127.0.0.1:8080"));
    }
}
