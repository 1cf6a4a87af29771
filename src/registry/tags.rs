//! Tag listing: `GET /v2/<repo>/tags/list?n=1000`, following `Link: <...>; rel="next"`
//! until the registry stops sending one, capped at `max_tags`. No auth or retry logic
//! here: every page goes through `RegistryClient::send`.

use reqwest::header::LINK;

use super::client::{err, read_capped, unexpected, Access, RegistryClient};
use crate::ports::{RegistryError, RegistryErrorKind};

/// Page size asked for.
const PAGE: usize = 1000;
/// Largest tag list page body.
const MAX_PAGE_BYTES: u64 = 16 << 20;

#[derive(serde::Deserialize)]
struct TagList {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// The target of the `rel="next"` entry of a `Link` header value.
pub fn next_link(value: &str) -> Option<String> {
    value.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let is_next = params.split(';').any(|p| {
            let p = p.trim();
            p == r#"rel="next""# || p == "rel=next"
        });
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| target.to_string())
    })
}

impl RegistryClient {
    /// Every tag of the repository, page by page.
    pub(crate) async fn list_tags(&self) -> Result<Vec<String>, RegistryError> {
        let what = "list tags";
        let mut next = Some(self.url(&format!("tags/list?n={PAGE}")));
        let mut tags: Vec<String> = Vec::new();
        while let Some(url) = next.take() {
            let build = |c: &reqwest::Client| Ok(c.get(&url));
            let resp = self.send(what, &url, Access::Pull, true, &build).await?;
            if !resp.status().is_success() {
                return Err(unexpected(what, &url, resp.status()));
            }
            let link = resp
                .headers()
                .get(LINK)
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
            let body = read_capped(resp, MAX_PAGE_BYTES, what, &url).await?;
            let page: TagList = serde_json::from_slice(&body).map_err(|e| {
                err(
                    RegistryErrorKind::Protocol,
                    format!("failed to {what} {url}: invalid tag list: {e}"),
                )
            })?;
            let page = page.tags.unwrap_or_default();
            let empty = page.is_empty();
            tags.extend(page);
            if tags.len() > self.settings.max_tags {
                return Err(err(
                    RegistryErrorKind::Integrity,
                    format!(
                        "failed to {what} {url}: more than {} tags",
                        self.settings.max_tags
                    ),
                ));
            }
            if let Some(target) = link {
                if empty {
                    return Err(err(
                        RegistryErrorKind::Protocol,
                        format!("failed to {what} {url}: an empty page links to another"),
                    ));
                }
                let resolved = reqwest::Url::parse(&url)
                    .and_then(|base| base.join(&target))
                    .map_err(|_| {
                        err(
                            RegistryErrorKind::Protocol,
                            format!("failed to {what} {url}: invalid Link '{target}'"),
                        )
                    })?;
                next = Some(resolved.to_string());
            }
        }
        Ok(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::next_link;

    #[test]
    fn finds_the_next_link() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?last=x&n=1000>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?last=x&n=1000")
        );
        assert_eq!(
            next_link(r#"<https://h/p?a=1>; rel="prev", <https://h/q>; rel="next""#).as_deref(),
            Some("https://h/q")
        );
        assert_eq!(next_link(r#"</v2/a/tags/list>; rel="prev""#), None);
    }
}
