//! AWS Signature Version 4 for the requests the ECR login sends: a path without query,
//! a few headers, a small body. It follows the published algorithm (canonical request,
//! string to sign, the date/region/service/`aws4_request` key chain) and is checked
//! against AWS's SigV4 test-suite vectors below; `tests/cloud_aws.rs` has moto recompute
//! the signature of the real ECR call. Why this is not the `aws-sigv4` crate: see
//! `cloud/mod.rs`. Credentials go in and a header comes out; nothing is logged.

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

/// One request to sign.
pub(crate) struct Request<'a> {
    /// `POST`, `GET`.
    pub method: &'a str,
    /// The `Host` header as sent (`host` or `host:port` for a non-default port).
    pub host: &'a str,
    /// The URI path, already URI-encoded (`/` for the JSON APIs).
    pub path: &'a str,
    /// Further headers to sign, besides `host`, `x-amz-date` and the session token.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

/// Who signs, where, and when.
pub(crate) struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub session_token: Option<&'a str>,
    pub region: &'a str,
    pub service: &'a str,
    pub time: DateTime<Utc>,
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// The headers to add to the request: `x-amz-date`, `x-amz-security-token` (with a
/// session token) and `authorization`.
pub(crate) fn sign(request: &Request<'_>, signer: &Signer<'_>) -> Vec<(&'static str, String)> {
    let amz_date = signer.time.format("%Y%m%dT%H%M%SZ").to_string();
    let day = signer.time.format("%Y%m%d").to_string();
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    headers.push(("host".into(), request.host.to_string()));
    headers.push(("x-amz-date".into(), amz_date.clone()));
    if let Some(t) = signer.session_token {
        headers.push(("x-amz-security-token".into(), t.to_string()));
    }
    headers.sort();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let canonical_request = format!(
        "{}\n{}\n\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        request.path,
        hex::encode(Sha256::digest(request.body))
    );
    let scope = format!("{day}/{}/{}/aws4_request", signer.region, signer.service);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical_request.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", signer.secret_access_key).as_bytes(),
        day.as_bytes(),
    );
    for part in [signer.region, signer.service, "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let signature = hex::encode(hmac(&key, string_to_sign.as_bytes()));
    let mut out = vec![("x-amz-date", amz_date)];
    if let Some(t) = signer.session_token {
        out.push(("x-amz-security-token", t.to_string()));
    }
    out.push((
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            signer.access_key_id
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// The credentials and time of AWS's SigV4 test suite (`aws-sig-v4-test-suite`).
    fn suite_signer() -> Signer<'static> {
        Signer {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token: None,
            region: "us-east-1",
            service: "service",
            time: "2015-08-30T12:36:00Z".parse().unwrap(),
        }
    }

    #[rstest]
    #[case::get_vanilla(
        "GET",
        &[],
        b"",
        "host;x-amz-date",
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )]
    #[case::post_vanilla(
        "POST",
        &[],
        b"",
        "host;x-amz-date",
        "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"
    )]
    #[case::post_x_www_form_urlencoded(
        "POST",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"Param1=value1",
        "content-type;host;x-amz-date",
        "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
    )]
    fn published_test_vectors(
        #[case] method: &str,
        #[case] headers: &[(&str, &str)],
        #[case] body: &[u8],
        #[case] signed: &str,
        #[case] signature: &str,
    ) {
        let request = Request {
            method,
            host: "example.amazonaws.com",
            path: "/",
            headers,
            body,
        };
        let out = sign(&request, &suite_signer());
        assert_eq!(out[0], ("x-amz-date", "20150830T123600Z".to_string()));
        assert_eq!(
            out[1].1,
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                 SignedHeaders={signed}, Signature={signature}"
            )
        );
    }

    #[test]
    fn a_session_token_is_sent_and_signed() {
        let signer = Signer {
            session_token: Some("session"),
            ..suite_signer()
        };
        let request = Request {
            method: "POST",
            host: "example.amazonaws.com",
            path: "/",
            headers: &[],
            body: b"",
        };
        let out = sign(&request, &signer);
        assert_eq!(out[1], ("x-amz-security-token", "session".to_string()));
        assert!(out[2]
            .1
            .contains("SignedHeaders=host;x-amz-date;x-amz-security-token,"));
        let unsigned = sign(&request, &suite_signer());
        assert_ne!(out[2].1, unsigned[1].1, "the token changes the signature");
    }
}
