package egress

import (
	"net/netip"
	"slices"
	"strings"

	"code.dny.dev/ssrf"
)

// Class is the kind of an address, as the guard decides and logs it.
type Class string

// The classes of addresses. Only Public is allowed by default.
const (
	Public Class = "public"
	// Metadata is a cloud instance metadata service (AWS, GCP, Azure,
	// OpenStack and others on 169.254.169.254; AWS's on fd00:ec2::254;
	// ECS and EKS credential endpoints; any of them through NAT64 or 6to4):
	// it hands out the machine's cloud credentials to whoever asks, so it is
	// never allowed.
	Metadata  Class = "metadata"
	Loopback  Class = "loopback"   // 127.0.0.0/8, ::1
	Private   Class = "private"    // RFC 1918, fc00::/7 (unique local), 100.64.0.0/10 (shared, carrier-grade NAT)
	LinkLocal Class = "link_local" // 169.254.0.0/16, fe80::/10
	// Unspecified is 0.0.0.0/8 and ::, which Linux connects to the local
	// machine: loopback in disguise.
	Unspecified Class = "unspecified"
	Multicast   Class = "multicast"
	// Reserved is every other special-purpose range of the IANA registries
	// (documentation, benchmarking, 240.0.0.0/4, 6to4, NAT64, IPv6 outside
	// 2000::/3, ...): nothing an upstream should be reached at.
	Reserved Class = "reserved"
)

// AllowableClasses are the classes egress.allow may name. The others are
// allowed only by a prefix (Metadata not even so).
var AllowableClasses = []Class{Loopback, Private, LinkLocal}

// metadataAddrs are the cloud metadata and credential endpoints.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task credentials
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS pod identity
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS pod identity over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598

// IPv6 prefixes that carry an IPv4 address a gateway or relay connects to: NAT64's well-known prefix
// (RFC 6052; the address in the last 32 bits) and 6to4 (RFC 3056; in the 32 bits after 2002::/16).
var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// isMetadata reports whether a is a metadata address, or one through NAT64 or 6to4: those prefixes are
// Reserved, but a prefix an operator opens (64:ff9b::/96, to reach IPv4 services from an IPv6-only
// host) must not open the metadata service behind them.
func isMetadata(a netip.Addr) bool {
	if slices.Contains(metadataAddrs, a) {
		return true
	}
	b := a.As16()
	switch {
	case nat64WellKnown.Contains(a):
		return slices.Contains(metadataAddrs, netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return slices.Contains(metadataAddrs, netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}

// Classify is a's class. An IPv4-mapped IPv6 address is classified as the
// IPv4 address it carries.
func Classify(a netip.Addr) Class {
	a = a.Unmap()
	switch {
	case isMetadata(a):
		return Metadata
	case a.IsLoopback():
		return Loopback
	case a.IsPrivate() || sharedSpace.Contains(a):
		return Private
	case a.IsLinkLocalUnicast():
		return LinkLocal
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return Unspecified
	case a.IsMulticast():
		return Multicast
	case reserved(a):
		return Reserved
	}
	return Public
}

// reserved: in the IANA special-purpose registries as code.dny.dev/ssrf
// carries them, or (IPv6) outside global unicast.
func reserved(a netip.Addr) bool {
	if a.Is4() {
		return containsAny(ssrf.IPv4DeniedPrefixes, a)
	}
	return !ssrf.IPv6GlobalUnicast.Contains(a) || containsAny(ssrf.IPv6DeniedPrefixes, a)
}

func containsAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func classList(cs []Class) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}
