//! The logical pipelines' stages, with OVN 23.03's table numbers and names.

/// Ingress or egress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pipeline {
    /// Ingress pipeline (printed first by `lflow-list`).
    Ingress,
    /// Egress pipeline.
    Egress,
}

impl Pipeline {
    /// `ingress` / `egress`.
    pub fn name(self) -> &'static str {
        match self {
            Pipeline::Ingress => "ingress",
            Pipeline::Egress => "egress",
        }
    }
}

macro_rules! stages {
    ($($var:ident = ($kind:ident, $pipe:ident, $table:expr, $name:expr),)*) => {
        /// One stage of a logical switch (`Ls*`) or router (`Lr*`) pipeline.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum Stage { $($var,)* }

        impl Stage {
            /// Every stage, switch ingress first.
            pub const ALL: &'static [Stage] = &[$(Stage::$var,)*];

            /// The stage's name as `lflow-list` prints it (`ls_in_acl`, …).
            pub fn name(self) -> &'static str {
                match self { $(Stage::$var => $name,)* }
            }

            /// The logical table number.
            pub fn table(self) -> u8 {
                match self { $(Stage::$var => $table,)* }
            }

            /// Ingress or egress.
            pub fn pipeline(self) -> Pipeline {
                match self { $(Stage::$var => Pipeline::$pipe,)* }
            }

            /// True for a router stage.
            pub fn is_router(self) -> bool {
                match self { $(Stage::$var => stages!(@router $kind),)* }
            }
        }
    };
    (@router Ls) => { false };
    (@router Lr) => { true };
}

stages! {
    LsInCheckPortSec = (Ls, Ingress, 0, "ls_in_check_port_sec"),
    LsInApplyPortSec = (Ls, Ingress, 1, "ls_in_apply_port_sec"),
    LsInLookupFdb = (Ls, Ingress, 2, "ls_in_lookup_fdb"),
    LsInPutFdb = (Ls, Ingress, 3, "ls_in_put_fdb"),
    LsInPreAcl = (Ls, Ingress, 4, "ls_in_pre_acl"),
    LsInPreLb = (Ls, Ingress, 5, "ls_in_pre_lb"),
    LsInPreStateful = (Ls, Ingress, 6, "ls_in_pre_stateful"),
    LsInAclHint = (Ls, Ingress, 7, "ls_in_acl_hint"),
    LsInAcl = (Ls, Ingress, 8, "ls_in_acl"),
    LsInQosMark = (Ls, Ingress, 9, "ls_in_qos_mark"),
    LsInQosMeter = (Ls, Ingress, 10, "ls_in_qos_meter"),
    LsInLbAffCheck = (Ls, Ingress, 11, "ls_in_lb_aff_check"),
    LsInLb = (Ls, Ingress, 12, "ls_in_lb"),
    LsInLbAffLearn = (Ls, Ingress, 13, "ls_in_lb_aff_learn"),
    LsInPreHairpin = (Ls, Ingress, 14, "ls_in_pre_hairpin"),
    LsInNatHairpin = (Ls, Ingress, 15, "ls_in_nat_hairpin"),
    LsInHairpin = (Ls, Ingress, 16, "ls_in_hairpin"),
    LsInAclAfterLb = (Ls, Ingress, 17, "ls_in_acl_after_lb"),
    LsInStateful = (Ls, Ingress, 18, "ls_in_stateful"),
    LsInArpRsp = (Ls, Ingress, 19, "ls_in_arp_rsp"),
    LsInDhcpOptions = (Ls, Ingress, 20, "ls_in_dhcp_options"),
    LsInDhcpResponse = (Ls, Ingress, 21, "ls_in_dhcp_response"),
    LsInDnsLookup = (Ls, Ingress, 22, "ls_in_dns_lookup"),
    LsInDnsResponse = (Ls, Ingress, 23, "ls_in_dns_response"),
    LsInExternalPort = (Ls, Ingress, 24, "ls_in_external_port"),
    LsInL2Lkup = (Ls, Ingress, 25, "ls_in_l2_lkup"),
    LsInL2Unknown = (Ls, Ingress, 26, "ls_in_l2_unknown"),
    LsOutPreAcl = (Ls, Egress, 0, "ls_out_pre_acl"),
    LsOutPreLb = (Ls, Egress, 1, "ls_out_pre_lb"),
    LsOutPreStateful = (Ls, Egress, 2, "ls_out_pre_stateful"),
    LsOutAclHint = (Ls, Egress, 3, "ls_out_acl_hint"),
    LsOutAcl = (Ls, Egress, 4, "ls_out_acl"),
    LsOutQosMark = (Ls, Egress, 5, "ls_out_qos_mark"),
    LsOutQosMeter = (Ls, Egress, 6, "ls_out_qos_meter"),
    LsOutStateful = (Ls, Egress, 7, "ls_out_stateful"),
    LsOutCheckPortSec = (Ls, Egress, 8, "ls_out_check_port_sec"),
    LsOutApplyPortSec = (Ls, Egress, 9, "ls_out_apply_port_sec"),
    LrInAdmission = (Lr, Ingress, 0, "lr_in_admission"),
    LrInLookupNeighbor = (Lr, Ingress, 1, "lr_in_lookup_neighbor"),
    LrInLearnNeighbor = (Lr, Ingress, 2, "lr_in_learn_neighbor"),
    LrInIpInput = (Lr, Ingress, 3, "lr_in_ip_input"),
    LrInUnsnat = (Lr, Ingress, 4, "lr_in_unsnat"),
    LrInDefrag = (Lr, Ingress, 5, "lr_in_defrag"),
    LrInLbAffCheck = (Lr, Ingress, 6, "lr_in_lb_aff_check"),
    LrInDnat = (Lr, Ingress, 7, "lr_in_dnat"),
    LrInLbAffLearn = (Lr, Ingress, 8, "lr_in_lb_aff_learn"),
    LrInEcmpStateful = (Lr, Ingress, 9, "lr_in_ecmp_stateful"),
    LrInNdRaOptions = (Lr, Ingress, 10, "lr_in_nd_ra_options"),
    LrInNdRaResponse = (Lr, Ingress, 11, "lr_in_nd_ra_response"),
    LrInIpRoutingPre = (Lr, Ingress, 12, "lr_in_ip_routing_pre"),
    LrInIpRouting = (Lr, Ingress, 13, "lr_in_ip_routing"),
    LrInIpRoutingEcmp = (Lr, Ingress, 14, "lr_in_ip_routing_ecmp"),
    LrInPolicy = (Lr, Ingress, 15, "lr_in_policy"),
    LrInPolicyEcmp = (Lr, Ingress, 16, "lr_in_policy_ecmp"),
    LrInArpResolve = (Lr, Ingress, 17, "lr_in_arp_resolve"),
    LrInChkPktLen = (Lr, Ingress, 18, "lr_in_chk_pkt_len"),
    LrInLargerPkts = (Lr, Ingress, 19, "lr_in_larger_pkts"),
    LrInGwRedirect = (Lr, Ingress, 20, "lr_in_gw_redirect"),
    LrInArpRequest = (Lr, Ingress, 21, "lr_in_arp_request"),
    LrOutChkDnatLocal = (Lr, Egress, 0, "lr_out_chk_dnat_local"),
    LrOutUndnat = (Lr, Egress, 1, "lr_out_undnat"),
    LrOutPostUndnat = (Lr, Egress, 2, "lr_out_post_undnat"),
    LrOutSnat = (Lr, Egress, 3, "lr_out_snat"),
    LrOutPostSnat = (Lr, Egress, 4, "lr_out_post_snat"),
    LrOutEgrLoop = (Lr, Egress, 5, "lr_out_egr_loop"),
    LrOutDelivery = (Lr, Egress, 6, "lr_out_delivery"),
}

impl Stage {
    /// Looks a stage up by its printed name.
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| s.name() == name)
    }
}
