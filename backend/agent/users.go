package agent

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// identity is who a process runs as and where relative paths start.
type identity struct {
	name     string
	uid, gid uint32
	groups   []uint32
	home     string
}

var root = identity{name: "root", home: "/root"}

// requestUser reads the user from "Authorization: Basic <user>:" as envd
// does. A user found in the image's /etc/passwd is used; any other (or
// none) is root, since an image without that user has no one else to be.
// With none, the sandbox's default user (defaultUser) when it has one.
func requestUser(h http.Header) identity {
	name := basicUser(h)
	if name == "" && defaultUser != nil {
		return *defaultUser
	}
	return lookupUser(name)
}

// processUser is the user a process runs as: the request's, else the
// image's USER (mainUser, set by Main), as the engine's own exec would
// run it; root when the image has none.
func processUser(h http.Header) identity {
	if basicUser(h) == "" && defaultUser == nil && mainUser != nil {
		return *mainUser
	}
	return requestUser(h)
}

// mainUser is the image's USER (EnvMainUser), nil when it has none.
var mainUser *identity

// defaultUser is the user of requests that name none, processes and files
// alike (EnvDefaultUser: E2B's envd takes its template's default user, "user"
// in /home/user on E2B's base); nil: processes run as mainUser and files as
// root, the native contract.
var defaultUser *identity

// EnvDefaultUser names defaultUser. The Docker provider sets it to "user"
// for sandboxes made through /e2b only; an image without that account
// keeps the native defaults.
const EnvDefaultUser = "DN_AGENT_DEFAULT_USER"

func basicUser(h interface{ Get(string) string }) string {
	name := ""
	if v, ok := strings.CutPrefix(h.Get("Authorization"), "Basic "); ok {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil {
			name, _, _ = strings.Cut(string(b), ":")
		}
	}
	return name
}

func lookupUser(name string) identity {
	if name == "" || name == "root" {
		return homeOr(root)
	}
	u, err := user.Lookup(name) // pure Go (CGO_ENABLED=0): reads /etc/passwd
	if err != nil {
		return homeOr(root)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return homeOr(root)
	}
	id := identity{name: u.Username, uid: uint32(uid), gid: uint32(gid), home: u.HomeDir}
	if gs, err := u.GroupIds(); err == nil {
		for _, g := range gs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				id.groups = append(id.groups, uint32(n))
			}
		}
	}
	return homeOr(id)
}

// homeOr falls back to / when the home directory does not exist (a
// scratch image has no /root).
func homeOr(id identity) identity {
	if fi, err := os.Stat(id.home); err != nil || !fi.IsDir() {
		id.home = "/"
	}
	return id
}

// credential is the SysProcAttr credential for id, nil when it is the
// agent's own user (a non-root agent cannot change users anyway).
func (id identity) credential() *syscall.Credential {
	if int(id.uid) == os.Getuid() && int(id.gid) == os.Getgid() {
		return nil
	}
	return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}
}

// resolve turns a path relative to the user's home into an absolute one;
// no path at all is the template's WORKDIR when it has one (E2B's envd:
// its default workdir stands for an empty path only, relative paths still
// start at the home).
func (id identity) resolve(p string) string {
	if p == "" {
		if defaultWorkdir != "" {
			return defaultWorkdir
		}
		return id.home
	}
	p = strings.TrimPrefix(p, "~/")
	if !strings.HasPrefix(p, "/") {
		p = strings.TrimSuffix(id.home, "/") + "/" + p
	}
	return p
}

// userSpec resolves a Docker USER ("name", "uid", with ":group" or ":gid"):
// unlike a request's user, one the image lacks is an error, as in Docker.
func userSpec(spec string) (identity, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	var id identity
	if uid, err := strconv.ParseUint(name, 10, 32); err == nil {
		id = identity{name: name, uid: uint32(uid), gid: uint32(uid), home: "/"}
		if u, err := user.LookupId(name); err == nil {
			id = lookupUser(u.Username)
		}
	} else {
		if _, err := user.Lookup(name); err != nil {
			return identity{}, fmt.Errorf("user %q (the image's USER) is not in the image's /etc/passwd", name)
		}
		id = lookupUser(name)
	}
	if hasGroup {
		if gid, err := strconv.ParseUint(group, 10, 32); err == nil {
			id.gid = uint32(gid)
		} else if g, err := user.LookupGroup(group); err == nil {
			n, _ := strconv.ParseUint(g.Gid, 10, 32)
			id.gid = uint32(n)
		} else {
			return identity{}, fmt.Errorf("group %q (the image's USER) is not in the image's /etc/group", group)
		}
		id.groups = []uint32{id.gid}
	}
	return homeOr(id), nil
}
