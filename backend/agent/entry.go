package agent

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem"
)

// entryInfo describes path (not following a final symlink) as envd does.
func entryInfo(path string, fi fs.FileInfo) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name:         filepath.Base(path),
		Path:         path,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
		Type:         fileType(fi.Mode()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = userName(st.Uid), groupName(st.Gid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := os.Readlink(path); err == nil {
			e.SymlinkTarget = &t
		}
	}
	return e
}

func fileType(m fs.FileMode) filesystem.FileType {
	switch {
	case m&fs.ModeSymlink != 0:
		return filesystem.FileType_FILE_TYPE_SYMLINK
	case m.IsDir():
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	}
	return filesystem.FileType_FILE_TYPE_FILE
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}
