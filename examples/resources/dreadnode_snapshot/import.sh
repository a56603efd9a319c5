# Import a snapshot by its template id (or its name; `dn snapshot list`
# shows both). sandbox_id and name are read back from the API and must
# match the configuration's, or the next plan replaces the snapshot.
terraform import dreadnode_snapshot.prepared <template-id>
