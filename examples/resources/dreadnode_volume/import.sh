# Import a volume by its id (`dn volume list` shows it). Its name must match
# the configuration's, or the next plan replaces the volume.
terraform import dreadnode_volume.datasets <volume-id>
