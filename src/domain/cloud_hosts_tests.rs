//! Every host shape of every provider, and the look-alikes that must not pass.

use rstest::rstest;

use super::*;

fn ecr(account: &str, region: &str, fips: bool) -> CloudRegistry {
    CloudRegistry::Ecr(EcrRegistry {
        account: account.into(),
        region: region.into(),
        fips,
    })
}

#[rstest]
#[case::commercial("012345678901.dkr.ecr.us-east-1.amazonaws.com", "us-east-1", false)]
#[case::fips(
    "012345678901.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
    "us-gov-west-1",
    true
)]
#[case::china(
    "012345678901.dkr.ecr.cn-north-1.amazonaws.com.cn",
    "cn-north-1",
    false
)]
#[case::dual_stack("012345678901.dkr-ecr.eu-west-1.on.aws", "eu-west-1", false)]
#[case::dual_stack_fips("012345678901.dkr-ecr-fips.us-east-1.on.aws", "us-east-1", true)]
#[case::iso(
    "012345678901.dkr.ecr.us-iso-east-1.c2s.ic.gov",
    "us-iso-east-1",
    false
)]
#[case::isob(
    "012345678901.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
    "us-isob-east-1",
    false
)]
#[case::isoe(
    "012345678901.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
    "eu-isoe-west-1",
    false
)]
#[case::isof(
    "012345678901.dkr.ecr.us-isof-south-1.csp.hci.ic.gov",
    "us-isof-south-1",
    false
)]
#[case::eusc(
    "012345678901.dkr.ecr.eusc-de-east-1.amazonaws.eu",
    "eusc-de-east-1",
    false
)]
#[case::upper_case("012345678901.DKR.ECR.US-EAST-1.AMAZONAWS.COM", "us-east-1", false)]
fn ecr_hosts(#[case] host: &str, #[case] region: &str, #[case] fips: bool) {
    assert_eq!(
        registry(CloudProvider::Aws, host),
        Ok(ecr("012345678901", region, fips))
    );
}

#[test]
fn public_ecr_is_aws() {
    assert_eq!(
        registry(CloudProvider::Aws, "public.ecr.aws"),
        Ok(CloudRegistry::PublicEcr)
    );
}

#[rstest]
#[case::suffix_after_host("012345678901.dkr.ecr.us-east-1.amazonaws.com.evil.io")]
#[case::prefix_before_account("evil.012345678901.dkr.ecr.us-east-1.amazonaws.com")]
#[case::short_account("12345.dkr.ecr.us-east-1.amazonaws.com")]
#[case::letters_in_account("01234567890a.dkr.ecr.us-east-1.amazonaws.com")]
#[case::no_account("dkr.ecr.us-east-1.amazonaws.com")]
#[case::wrong_service("012345678901.dkr.ecs.us-east-1.amazonaws.com")]
#[case::no_region("012345678901.dkr.ecr.amazonaws.com")]
#[case::two_region_labels("012345678901.dkr.ecr.us.east-1.amazonaws.com")]
#[case::region_with_underscore("012345678901.dkr.ecr.us_east_1.amazonaws.com")]
#[case::lookalike_suffix("012345678901.dkr.ecr.us-east-1.amazonaws.co")]
#[case::suffix_glued("012345678901.dkr.ecr.us-east-1amazonaws.com")]
#[case::china_typo("012345678901.dkr.ecr.cn-north-1.amazonaws.com.cnn")]
#[case::with_port("012345678901.dkr.ecr.us-east-1.amazonaws.com:443")]
#[case::public_lookalike("public.ecr.aws.evil.io")]
#[case::public_subdomain("evil.public.ecr.aws")]
#[case::gcr_host("gcr.io")]
#[case::acr_host("myreg.azurecr.io")]
#[case::docker_hub("docker.io")]
fn not_aws(#[case] host: &str) {
    let err = registry(CloudProvider::Aws, host).unwrap_err();
    assert_eq!(err.host, host);
    assert!(
        err.to_string().contains("not a registry of provider 'aws'"),
        "{err}"
    );
}

#[rstest]
#[case::gcr("gcr.io")]
#[case::gcr_regional("eu.gcr.io")]
#[case::gcr_us("us.gcr.io")]
#[case::artifact_registry("europe-west1-docker.pkg.dev")]
#[case::artifact_registry_multi_region("us-docker.pkg.dev")]
#[case::s3ns("docker.s3nsregistry.fr")]
#[case::upper_case("EU.GCR.IO")]
fn google_hosts(#[case] host: &str) {
    assert_eq!(
        registry(CloudProvider::Gcp, host),
        Ok(CloudRegistry::Google {
            host: host.to_ascii_lowercase()
        })
    );
}

#[rstest]
#[case::suffix_after_host("gcr.io.evil.io")]
#[case::glued("evilgcr.io")]
#[case::empty_label("..gcr.io")]
#[case::pkg_dev_without_docker("europe-west1.pkg.dev")]
#[case::pkg_dev_lookalike("europe-west1-docker.pkg.dev.evil.io")]
#[case::pkg_dev_bare("-docker.pkg.dev")]
#[case::with_port("gcr.io:443")]
#[case::s3ns_lookalike("docker.s3nsregistry.fr.evil.io")]
#[case::ecr_host("012345678901.dkr.ecr.us-east-1.amazonaws.com")]
fn not_gcp(#[case] host: &str) {
    let err = registry(CloudProvider::Gcp, host).unwrap_err();
    assert!(
        err.to_string().contains("not a registry of provider 'gcp'"),
        "{err}"
    );
}

#[rstest]
#[case::public("myreg.azurecr.io", AzureCloud::Public)]
#[case::germany("myreg.azurecr.de", AzureCloud::Public)]
#[case::china("myreg.azurecr.cn", AzureCloud::China)]
#[case::government("myreg.azurecr.us", AzureCloud::Government)]
#[case::geo_replica("myreg.westeurope.data.azurecr.io", AzureCloud::Public)]
#[case::upper_case("MyReg.AzureCR.io", AzureCloud::Public)]
fn acr_hosts(#[case] host: &str, #[case] cloud: AzureCloud) {
    assert_eq!(
        registry(CloudProvider::Azure, host),
        Ok(CloudRegistry::Acr {
            host: host.to_ascii_lowercase(),
            cloud
        })
    );
}

#[rstest]
#[case::suffix_after_host("myreg.azurecr.io.evil.io")]
#[case::bare_suffix("azurecr.io")]
#[case::glued("myregazurecr.io")]
#[case::empty_name(".azurecr.io")]
#[case::other_tld("myreg.azurecr.com")]
#[case::with_port("myreg.azurecr.io:443")]
#[case::gcr_host("gcr.io")]
fn not_azure(#[case] host: &str) {
    let err = registry(CloudProvider::Azure, host).unwrap_err();
    assert!(
        err.to_string()
            .contains("not a registry of provider 'azure'"),
        "{err}"
    );
}

#[rstest]
#[case::commercial("us-east-1", "amazonaws.com")]
#[case::gov_cloud("us-gov-west-1", "amazonaws.com")]
#[case::china("cn-northwest-1", "amazonaws.com.cn")]
#[case::iso("us-iso-east-1", "c2s.ic.gov")]
#[case::isob("us-isob-east-1", "sc2s.sgov.gov")]
#[case::isof("us-isof-south-1", "csp.hci.ic.gov")]
#[case::isoe("eu-isoe-west-1", "cloud.adc-e.uk")]
#[case::eusc("eusc-de-east-1", "amazonaws.eu")]
fn partitions(#[case] region: &str, #[case] suffix: &str) {
    assert_eq!(partition_dns_suffix(region), suffix);
}

#[test]
fn login_scopes_follow_what_a_token_is_valid_for() {
    let a = registry(
        CloudProvider::Aws,
        "111111111111.dkr.ecr.us-east-1.amazonaws.com",
    )
    .unwrap();
    let b = registry(
        CloudProvider::Aws,
        "222222222222.dkr.ecr.us-east-1.amazonaws.com",
    )
    .unwrap();
    let c = registry(
        CloudProvider::Aws,
        "111111111111.dkr.ecr.eu-west-1.amazonaws.com",
    )
    .unwrap();
    assert_eq!(a.login_scope(), b.login_scope(), "one ECR token per region");
    assert_ne!(a.login_scope(), c.login_scope());
    let g1 = registry(CloudProvider::Gcp, "gcr.io").unwrap();
    let g2 = registry(CloudProvider::Gcp, "europe-docker.pkg.dev").unwrap();
    assert_eq!(g1.login_scope(), g2.login_scope(), "one Google token");
    let z1 = registry(CloudProvider::Azure, "a.azurecr.io").unwrap();
    let z2 = registry(CloudProvider::Azure, "b.azurecr.io").unwrap();
    assert_ne!(
        z1.login_scope(),
        z2.login_scope(),
        "ACR tokens are per registry"
    );
}

#[test]
fn acr_scopes_per_cloud() {
    assert_eq!(
        AzureCloud::Public.acr_scope(),
        "https://containerregistry.azure.net/.default"
    );
    assert_eq!(
        AzureCloud::China.acr_scope(),
        "https://containerregistry.azure.cn/.default"
    );
    assert_eq!(
        AzureCloud::Government.acr_scope(),
        "https://containerregistry.azure.us/.default"
    );
}
