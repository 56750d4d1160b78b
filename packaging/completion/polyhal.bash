# bash completion for polyhal. The candidates come from the launcher itself
# (`polyhal __complete`), from the same table its help is made from, so the
# completion never lists a command or option the launcher does not know.
_polyhal() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    --config|--metrics-out|--metrics-csv|--profile-out|--input|--vocab)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur"); return ;;
    --plugin-path|--output|--tensorboard)
      mapfile -t COMPREPLY < <(compgen -d -- "$cur"); return ;;
  esac
  local words
  words=$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
  mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  # A config key after --set ("batch.micro="): its value follows, no space.
  if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]]; then compopt -o nospace; fi
  # A config file where a command takes one (run, validate).
  if [[ ${#COMPREPLY[@]} -eq 0 && $cur != -* ]]; then
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -F _polyhal polyhal
