//! Annotation reading of object-level workload identity: every provider's annotations,
//! their shapes as Flux checks them, and errors that name the ServiceAccount and the
//! annotation.

use rstest::rstest;

use super::*;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn read(provider: CloudProvider, pairs: &[(&str, &str)]) -> Result<ObjectIdentity, String> {
    ObjectIdentity::from_annotations(provider, "team", "puller", &annotations(pairs))
        .map_err(|e| e.to_string())
}

#[test]
fn aws_reads_the_role_arn() {
    let role = "arn:aws:iam::123456789012:role/ecr-reader";
    assert_eq!(
        read(CloudProvider::Aws, &[(AWS_ROLE_ARN, role)]),
        Ok(ObjectIdentity::Aws {
            role_arn: role.into()
        })
    );
}

#[rstest]
#[case::missing(&[], "is missing")]
#[case::empty(&[(AWS_ROLE_ARN, "  ")], "is missing")]
#[case::user_not_role(&[(AWS_ROLE_ARN, "arn:aws:iam::123456789012:user/ci")], "not an IAM role ARN")]
#[case::other_service(&[(AWS_ROLE_ARN, "arn:aws:sts::123456789012:role/x")], "not an IAM role ARN")]
#[case::letters_in_account(&[(AWS_ROLE_ARN, "arn:aws:iam::12345678901x:role/x")], "not an IAM role ARN")]
#[case::not_aws(&[(AWS_ROLE_ARN, "arn:gcp:iam::123456789012:role/x")], "not an IAM role ARN")]
#[case::azure_annotations_only(&[(AZURE_CLIENT_ID, "c")], "is missing")]
fn aws_errors_name_the_service_account_and_the_annotation(
    #[case] pairs: &[(&str, &str)],
    #[case] problem: &str,
) {
    let e = read(CloudProvider::Aws, pairs).unwrap_err();
    assert!(e.contains("serviceaccount 'team/puller'"), "{e}");
    assert!(e.contains(AWS_ROLE_ARN), "{e}");
    assert!(e.contains(problem), "{e}");
}

#[rstest]
#[case::china("arn:aws-cn:iam::123456789012:role/r")]
#[case::govcloud("arn:aws-us-gov:iam::123456789012:role/path/r")]
fn aws_accepts_other_partitions(#[case] role: &str) {
    assert!(read(CloudProvider::Aws, &[(AWS_ROLE_ARN, role)]).is_ok());
}

#[test]
fn gcp_on_gke_needs_no_annotation_and_may_impersonate() {
    assert_eq!(
        read(CloudProvider::Gcp, &[]),
        Ok(ObjectIdentity::Gcp {
            provider_audience: None,
            email: None
        })
    );
    let email = "reader@my-project.iam.gserviceaccount.com";
    let wip = "projects/123456/locations/global/workloadIdentityPools/pool/providers/k8s";
    assert_eq!(
        read(
            CloudProvider::Gcp,
            &[
                (GCP_SERVICE_ACCOUNT, email),
                (GCP_WORKLOAD_IDENTITY_PROVIDER, wip)
            ]
        ),
        Ok(ObjectIdentity::Gcp {
            provider_audience: Some(format!("//iam.googleapis.com/{wip}")),
            email: Some(email.into()),
        })
    );
}

#[rstest]
#[case::email_elsewhere(GCP_SERVICE_ACCOUNT, "reader@example.com")]
#[case::email_lookalike(GCP_SERVICE_ACCOUNT, "r@p.iam.gserviceaccount.com.evil.io")]
#[case::provider_project_name(
    GCP_WORKLOAD_IDENTITY_PROVIDER,
    "projects/my-project/locations/global/workloadIdentityPools/p/providers/k"
)]
#[case::provider_regional(
    GCP_WORKLOAD_IDENTITY_PROVIDER,
    "projects/1/locations/europe-west1/workloadIdentityPools/p/providers/k"
)]
#[case::provider_full_url(
    GCP_WORKLOAD_IDENTITY_PROVIDER,
    "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k"
)]
fn gcp_refuses_malformed_annotations(#[case] key: &str, #[case] value: &str) {
    let e = read(CloudProvider::Gcp, &[(key, value)]).unwrap_err();
    assert!(
        e.contains("serviceaccount 'team/puller'") && e.contains(key),
        "{e}"
    );
}

#[test]
fn azure_needs_client_and_tenant() {
    assert_eq!(
        read(
            CloudProvider::Azure,
            &[(AZURE_CLIENT_ID, "client"), (AZURE_TENANT_ID, "tenant")]
        ),
        Ok(ObjectIdentity::Azure {
            client_id: "client".into(),
            tenant_id: "tenant".into()
        })
    );
    let e = read(CloudProvider::Azure, &[(AZURE_CLIENT_ID, "client")]).unwrap_err();
    assert!(
        e.contains(AZURE_TENANT_ID) && e.contains("team/puller"),
        "{e}"
    );
    let e = read(CloudProvider::Azure, &[(AZURE_TENANT_ID, "tenant")]).unwrap_err();
    assert!(e.contains(AZURE_CLIENT_ID), "{e}");
}

#[test]
fn cache_keys_change_with_the_role() {
    let key = |role: &str| {
        ObjectIdentity::Aws {
            role_arn: role.into(),
        }
        .key()
    };
    assert_ne!(key("arn:aws:iam::1:role/a"), key("arn:aws:iam::1:role/b"));
}

#[test]
fn session_names_fit_sts_limits() {
    assert_eq!(
        aws_session_name("team", "puller", "us-east-1"),
        "puller.team.us-east-1.ocisource"
    );
    let long = aws_session_name(&"n".repeat(63), &"s".repeat(253), "us-east-1");
    assert_eq!(long.len(), 64);
}

#[rstest]
#[case::aws(CloudProvider::Aws, &[(AWS_ROLE_ARN, "arn:aws:iam::123456789012:role/r")])]
#[case::gcp(CloudProvider::Gcp, &[])]
#[case::azure(CloudProvider::Azure, &[(AZURE_CLIENT_ID, "c"), (AZURE_TENANT_ID, "t")])]
fn the_kubernetes_credential_provider_is_the_token_request(
    #[case] provider: CloudProvider,
    #[case] pairs: &[(&str, &str)],
) {
    let with = |value: &'static str| {
        let mut all = pairs.to_vec();
        all.push((CREDENTIAL_PROVIDER, value));
        read(provider, &all)
    };
    assert!(read(provider, pairs).is_ok());
    assert_eq!(with("kubernetes"), read(provider, pairs));
    for (value, problem) in [
        ("spiffe", "the SPIFFE credential provider is not supported"),
        ("vault", "'vault' is not a credential provider"),
    ] {
        let e = with(value).unwrap_err();
        assert!(e.contains("serviceaccount 'team/puller'"), "{e}");
        assert!(e.contains(CREDENTIAL_PROVIDER), "{e}");
        assert!(e.contains(problem), "{e}");
    }
}
