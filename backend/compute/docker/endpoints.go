package docker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// portsLabel renders template ports for labelPorts.
func portsLabel(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// endpoints maps the ports in labelPorts to the container's address on its
// network. Nothing is published on the host, so this address, reachable
// from the host's own network namespace only (inter-container traffic is
// off), is where the router dials. nil when the container has no such ports
// (an isolated sandbox) or no address yet (not started), so a record keeps
// what it had.
func endpoints(labels map[string]string, nets map[string]*network.EndpointSettings) map[int]compute.Endpoint {
	raw := labels[labelPorts]
	if raw == "" {
		return nil
	}
	ip := ""
	for _, name := range slices.Sorted(maps.Keys(nets)) { // one network in practice; sorted for a stable answer
		if n := nets[name]; n != nil && n.IPAddress != "" {
			ip = n.IPAddress
			break
		}
	}
	if ip == "" {
		return nil
	}
	out := map[int]compute.Endpoint{}
	for _, s := range strings.Split(raw, ",") {
		port, err := strconv.Atoi(s)
		if err != nil || port <= 0 || port > 65535 {
			continue
		}
		out[port] = compute.Endpoint{Host: ip, Port: port, URL: fmt.Sprintf("http://%s:%d", ip, port)}
	}
	return out
}
