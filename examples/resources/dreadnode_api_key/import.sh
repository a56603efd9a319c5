# Import an API key by its id (`key_…`, as `dn keys list` shows it). The
# secret is returned only when the key is made, so `key` is null after an
# import; replace the key (terraform apply -replace=...) if you need it.
terraform import dreadnode_api_key.ci <key-id>
