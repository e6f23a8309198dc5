#!/bin/sh
# A toolbox command (TOPSAIL's `cluster label_nodes`), called by testbed as
#   label_nodes.sh --key=K --value=V --dry_run=true|false
# with the arguments of the campaign's `commands:` entry and the step's `extra`.
# On a cluster (testbed sets NAMESPACE and KUBECONFIG) it labels every node; on the local
# backend there are no nodes, and it says so.
set -eu
key="" value="" dry_run=false
for arg in "$@"; do
  case "$arg" in
    --key=*) key="${arg#--key=}" ;;
    --value=*) value="${arg#--value=}" ;;
    --dry_run=*) dry_run="${arg#--dry_run=}" ;;
    *) echo "label_nodes: unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -n "$key" ] && [ -n "$value" ] || { echo "label_nodes: --key and --value are required" >&2; exit 2; }
echo "$key=$value" > "$ARTIFACT_DIR/label.txt"
if [ -z "${NAMESPACE:-}" ]; then
  echo "no cluster (local backend): no node to label with $key=$value"
  exit 0
fi
flags=""
[ "$dry_run" = true ] && flags="--dry-run=client"
kubectl label nodes --all "$key=$value" --overwrite $flags
kubectl get nodes -L "$key" > "$ARTIFACT_DIR/nodes.txt"
