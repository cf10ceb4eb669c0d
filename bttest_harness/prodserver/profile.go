package prodserver

import (
	"fmt"
	"slices"
	"strings"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultProfileID is the app profile a request without app_profile_id
// uses. Source (App profiles overview,
// https://cloud.google.com/bigtable/docs/app-profiles): "When your
// application connects to a Bigtable instance, it uses either the default
// app profile or an app profile specified by you"; "When you create a
// Bigtable instance, a default app profile is created automatically, and
// its settings depend on the number of clusters the instance has."
const DefaultProfileID = "default"

// routing is how a profile routes: the three kinds the AppProfile proto
// offers that the double models (google/bigtable/admin/v2/instance.proto,
// AppProfile.routing_policy and AppProfile.isolation).
type routing int

const (
	routeSingle routing = iota
	routeMulti
	routeDataBoost
)

// AppProfile is an app profile of the emulated instance. Build it with
// SingleCluster, MultiCluster or DataBoost: a profile has exactly one
// routing policy, so a contradictory one (multi-cluster with transactions,
// Data Boost that writes) cannot be written.
type AppProfile struct {
	id            string
	routing       routing
	cluster       string
	transactional bool
}

// SingleCluster is a standard profile with single-cluster routing to
// cluster. transactional is the proto's
// SingleClusterRouting.allow_transactional_writes: "Whether or not
// CheckAndMutateRow and ReadModifyWriteRow requests are allowed by this
// app profile. It is unsafe to send these requests to the same
// table/row/column in multiple clusters." (the field's default is false).
func SingleCluster(id, cluster string, transactional bool) AppProfile {
	return AppProfile{id: id, routing: routeSingle, cluster: cluster, transactional: transactional}
}

// MultiCluster is a standard profile with multi-cluster routing to any
// cluster of the instance (AppProfile.MultiClusterRoutingUseAny). It
// cannot allow single-row transactions: the proto has no such field for
// multi-cluster routing, and the App profiles overview says single-row
// transactions need single-cluster routing.
func MultiCluster(id string) AppProfile {
	return AppProfile{id: id, routing: routeMulti}
}

// DataBoost is a Data Boost profile reading the data of cluster
// (AppProfile.DataBoostIsolationReadOnly with single-cluster routing):
// "Data Boost supports read-only use cases with single-cluster routing"
// (instance.proto), "You can't send write or delete requests with Data
// Boost" (Data Boost overview,
// https://cloud.google.com/bigtable/docs/data-boost-overview).
func DataBoost(id, cluster string) AppProfile {
	return AppProfile{id: id, routing: routeDataBoost, cluster: cluster}
}

// ID is the profile's ID, the requests' app_profile_id.
func (p AppProfile) ID() string { return p.id }

// Cluster is the cluster a single-cluster or Data Boost profile routes to,
// "" for multi-cluster.
func (p AppProfile) Cluster() string { return p.cluster }

// Transactional says whether the profile allows CheckAndMutateRow and
// ReadModifyWriteRow.
func (p AppProfile) Transactional() bool { return p.transactional }

// IsMultiCluster and IsDataBoost say which kind the profile is.
func (p AppProfile) IsMultiCluster() bool { return p.routing == routeMulti }

// IsDataBoost says whether the profile is a read-only Data Boost profile.
func (p AppProfile) IsDataBoost() bool { return p.routing == routeDataBoost }

func (p AppProfile) String() string {
	switch p.routing {
	case routeMulti:
		return fmt.Sprintf("%s (multi-cluster routing)", p.id)
	case routeDataBoost:
		return fmt.Sprintf("%s (Data Boost, cluster %s)", p.id, p.cluster)
	}
	return fmt.Sprintf("%s (single-cluster routing to %s, transactional writes %v)", p.id, p.cluster, p.transactional)
}

// proto is the profile as the instance admin API shows it.
func (p AppProfile) proto(instanceName string) *btapb.AppProfile {
	ap := &btapb.AppProfile{Name: instanceName + "/appProfiles/" + p.id}
	switch p.routing {
	case routeMulti:
		ap.RoutingPolicy = &btapb.AppProfile_MultiClusterRoutingUseAny_{MultiClusterRoutingUseAny: &btapb.AppProfile_MultiClusterRoutingUseAny{}}
	case routeDataBoost:
		ap.RoutingPolicy = &btapb.AppProfile_SingleClusterRouting_{SingleClusterRouting: &btapb.AppProfile_SingleClusterRouting{ClusterId: p.cluster}}
		ap.Isolation = &btapb.AppProfile_DataBoostIsolationReadOnly_{DataBoostIsolationReadOnly: &btapb.AppProfile_DataBoostIsolationReadOnly{}}
	default:
		ap.RoutingPolicy = &btapb.AppProfile_SingleClusterRouting_{SingleClusterRouting: &btapb.AppProfile_SingleClusterRouting{ClusterId: p.cluster, AllowTransactionalWrites: p.transactional}}
	}
	return ap
}

// defaultProfile is the instance's default profile when Config.Profiles
// does not name one. For one cluster: single-cluster routing with
// single-row transactions; for two or more: multi-cluster routing, no
// transactions. Source: App profiles overview, "Default app profile"
// (https://cloud.google.com/bigtable/docs/app-profiles#default-app-profile):
// the default profile's settings depend on the number of clusters the
// instance was created with.
func defaultProfile(clusters []string) AppProfile {
	if len(clusters) == 1 {
		return SingleCluster(DefaultProfileID, clusters[0], true)
	}
	return MultiCluster(DefaultProfileID)
}

// Messages of the refusals. errTransactions is production's message, as a
// client surfaced it: "FailedPrecondition: 400 Single-row transactions are
// not allowed by this app profile"
// (https://github.com/googleapis/google-cloud-python/pull/10021).
const msgTransactions = "Single-row transactions are not allowed by this app profile"

// unknownProfile refuses a request naming a profile the instance does not
// have. The code (NOT_FOUND) and message are the double's: no source
// cited here gives production's exact answer (docs/emulators.md says so).
func unknownProfile(id string) error {
	return status.Errorf(codes.NotFound, "App profile not found: %q", id)
}

// dataBoostWrite refuses a write through a Data Boost profile. Source:
// Data Boost overview, "You can't send write or delete requests with Data
// Boost." The code (FAILED_PRECONDITION, as for a refused transaction) and
// message are the double's.
func dataBoostWrite(p AppProfile) error {
	return status.Errorf(codes.FailedPrecondition, "App profile %q is a Data Boost profile, which is read-only: write requests are not allowed by this app profile", p.id)
}

// sortedProfiles are the instance's profiles by ID.
func (s *Server) sortedProfiles() []AppProfile {
	out := make([]AppProfile, 0, len(s.profiles))
	for _, p := range s.profiles {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b AppProfile) int { return strings.Compare(a.id, b.id) })
	return out
}
