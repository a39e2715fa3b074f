// Labfy browser UI: an investigation browser for the analyst.
//
// Rules this file keeps (SPEC S4 and the page's Content-Security-Policy):
// - every string that comes from the API reaches the DOM through
//   `textContent` or `createTextNode`; no innerHTML, insertAdjacentHTML,
//   outerHTML, document.write or eval anywhere;
// - no inline style: looks come from classes in app.css;
// - links only ever point at this page's own `#/...` routes.
//
// Single page with hash routing so the back button works:
//   #/                      overview of the current investigation
//   #/evidence/<ref>        evidence reader
//   #/node/<ref>            a graph node and its neighbours
//   #/provenance/<ref>      the provenance trail of an object

import { egoGraph } from './graph.js';

const LANG_KEY = 'labfy.lang';
const LANGS = ['fr', 'en'];
const LOCALES = { fr: 'fr-FR', en: 'en-GB' };
const EXCERPT_PAGE = 4000;
const NEIGHBOURS_PAGE = 50;
const NEIGHBOURS_MAX = 500; // the server's bound on `limit`
const SEARCH_LIMIT = 20;
const SEARCH_MAX_CHARS = 256;
const NOTE_TITLE_MAX_CHARS = 200;
const NOTE_SOURCE = 'analyste:navigateur';
const CORRELATIONS_LIMIT = 20;
const PROVENANCE_DEPTH = 8;
const REQUEST_TIMEOUT_MS = 20000;
// How long the page waits for the server to come back on another workspace (SPEC C1).
const WORKSPACE_SWITCH_TIMEOUT_MS = 60000;
const MARK_START = '\uE000';
const MARK_END = '\uE001';

// All UI labels, French first. `{name}` is replaced by `t(key, {name})`.
const I18N = {
  fr: {
    lang_group: 'Langue',
    class_SPECIMEN: 'SPECIMEN — données synthétiques',
    class_REAL: 'RÉEL',
    isolated: 'isolé du réseau',
    not_isolated: 'NON ISOLÉ',
    missing_protections: 'protections absentes :',
    missing_landlock: 'Landlock',
    missing_seccomp: 'filtre d’appels système',
    missing_proc: '/proc privé',
    investigation_label: 'Enquête',
    search_label: 'Rechercher dans les pièces',
    search_placeholder: 'Mots, nom, domaine…',
    search_button: 'Rechercher',
    search_hint: 'Saisissez un terme pour chercher dans les pièces de l’enquête.',
    search_loading: 'Recherche de « {q} »…',
    search_hits_one: '{n} résultat pour « {q} »',
    search_hits_other: '{n} résultats pour « {q} »',
    search_none: 'Aucun résultat pour « {q} ».',
    search_truncated: 'Liste tronquée : précisez la recherche.',
    search_ranked_among: 'Recherche très large : seuls les {n} éléments les plus récents qui correspondent sont classés. Précisez-la pour tout classer.',
    search_too_long: 'La recherche est limitée à {n} caractères.',
    search_no_investigation: 'Aucune enquête ouverte : recherche impossible.',
    nav_overview: 'Vue d’ensemble',
    nav_cases: 'Enquêtes',
    cases_heading: 'Enquêtes du dossier',
    cases_new: 'Nouvelle enquête',
    cases_title: 'Titre',
    cases_summary: 'Résumé (facultatif)',
    cases_create: 'Créer l’enquête',
    cases_created: 'Enquête « {title} » créée.',
    cases_missing_title: 'Le titre est obligatoire.',
    cases_open: 'Ouvrir',
    cases_rename: 'Renommer',
    cases_save: 'Enregistrer',
    cases_cancel: 'Annuler',
    cases_archive: 'Archiver',
    cases_unarchive: 'Réactiver',
    cases_archived: 'archivée',
    cases_current: 'ouverte',
    cases_archived_done: 'Enquête « {title} » archivée : elle reste entière et peut être réactivée.',
    cases_unarchived_done: 'Enquête « {title} » réactivée.',
    cases_renamed: 'Enquête renommée « {title} ».',
    cases_items_one: '{n} pièce',
    cases_items_other: '{n} pièces',
    cases_workspace: 'Dossier',
    cases_workspace_name: 'Nom du dossier',
    cases_workspace_renamed: 'Dossier renommé « {name} ».',
    cases_new_workspace: 'Nouveau dossier RÉEL',
    cases_new_workspace_help: 'Un serveur sert un seul dossier à la fois, isolé du réseau. Le nouveau dossier s’ouvre depuis la liste des dossiers : Labfy relance alors le serveur sur lui.',
    cases_workspace_create: 'Créer le dossier',
    cases_workspace_created: 'Dossier « {name} » créé. Ouvrez-le depuis la liste des dossiers.',
    cases_workspaces: 'Dossiers',
    cases_ws_open: 'Ouvrir ce dossier',
    cases_ws_current: 'ouvert',
    cases_ws_archived: 'archivé',
    cases_ws_generating: 'en préparation',
    cases_ws_investigations_one: '{n} enquête',
    cases_ws_investigations_other: '{n} enquêtes',
    cases_ws_archived_done: 'Dossier « {name} » archivé : il reste entier et peut être réactivé.',
    cases_ws_unarchived_done: 'Dossier « {name} » réactivé.',
    switch_heading: 'Ouverture du dossier « {name} »',
    switch_wait: 'Labfy relance le serveur sur ce dossier. La page se recharge d’elle-même dans quelques secondes.',
    switch_failed: 'Le dossier « {name} » ne s’est pas ouvert. Le journal de Labfy dit pourquoi ; le dossier précédent reste servi.',
    switch_reload: 'Recharger la page',
    loading: 'Chargement…',
    empty: 'Rien à afficher.',
    unknown_route: 'Page inconnue : retour à la vue d’ensemble.',
    view_failed: 'Cette page n’a pas pu être chargée (voir le message ci-dessus).',
    back_overview: 'Retour à la vue d’ensemble',
    no_workspace: 'Aucun espace de travail pour cette session.',
    no_investigation: 'Aucune enquête dans cet espace de travail.',
    overview_heading: 'Enquête',
    created_label: 'Créée le',
    counts_heading: 'Volumes',
    count_evidence: 'Pièces',
    count_entities: 'Entités',
    count_relations: 'Relations',
    count_provenance: 'Traces de provenance',
    count_jobs: 'Tâches',
    section_entity_kinds: 'Types d’entités',
    section_top_entities: 'Entités principales',
    section_correlations: 'Entités partagées entre pièces',
    section_recent_evidence: 'Pièces récentes',
    section_jobs: 'Tâches',
    section_processes: 'Processus',
    role_server: 'serveur de travail',
    role_governor: 'gouverneur de ressources',
    role_egress: 'egress (Tor)',
    processes_none: 'Non supervisé : {detail}',
    restarts: '{n} redémarrage(s)',
    proc_state_starting: 'démarrage',
    proc_state_healthy: 'en service',
    proc_state_unhealthy: 'sans réponse',
    proc_state_restarting: 'redémarrage',
    proc_state_switching: 'changement de dossier',
    proc_state_failed: 'abandonné',
    proc_state_stopping: 'arrêt en cours',
    proc_state_stopped: 'arrêté',
    proc_not_ready: 'pas prêt',
    proc_detail: 'Détail du processus (tel qu’il l’écrit, en anglais)',
    section_export: 'Exporter l’enquête',
    export_help: 'Un paquet vérifiable : pièces et originaux, entités, relations, provenance, autorisations, journal d’audit, graphe STIX 2.1, empreintes SHA-256 et manifeste. Transmettez son empreinte à part : le destinataire la vérifie hors ligne.',
    export_start: 'Exporter',
    export_running: 'Export en cours…',
    export_done: 'Export terminé : {files} fichiers.',
    export_failed: 'L’export a échoué : {reason}',
    export_fingerprint: 'Empreinte du paquet',
    export_dir: 'Dossier sur cette machine',
    export_download: 'Télécharger l’archive (.tar)',
    export_verify: 'Pour vérifier',
    job_kind_export: 'Export de l’enquête',
    section_import: 'Importer des fichiers',
    import_drop: 'Déposez ici des fichiers ou un dossier',
    import_or: 'ou',
    import_pick_files: 'Choisir des fichiers',
    import_pick_folder: 'Choisir un dossier',
    import_help: 'Texte (tout encodage courant), HTML, PDF, courriels .eml et boîtes .mbox (pièces jointes et messages deviennent des pièces liées), documents bureautiques ; le reste est gardé tel quel. Les originaux sont conservés et empreintés (SHA-256), lus par un analyseur confiné, puis les sélecteurs sont extraits.',
    import_sending: 'Envoi : {done} fichiers sur {total} · {sent} sur {bytes}',
    import_reading: 'Lecture des fichiers reçus par l’analyseur confiné…',
    import_done: 'Import terminé : {counts}.',
    import_n_imported_one: '{n} importé', import_n_imported_other: '{n} importés',
    import_n_duplicates_one: '{n} doublon', import_n_duplicates_other: '{n} doublons',
    import_n_refused_one: '{n} refusé', import_n_refused_other: '{n} refusés',
    import_n_embedded_one: '{n} document joint', import_n_embedded_other: '{n} documents joints',
    import_failed: 'L’import s’est arrêté : {reason}',
    import_outcome_imported: 'importé',
    import_outcome_duplicate: 'déjà présent',
    import_outcome_refused: 'refusé',
    import_report: 'Résultat fichier par fichier',
    job_kind_import: 'Import de fichiers',
    import_n_files_one: '{n} fichier', import_n_files_other: '{n} fichiers',
    import_heading: 'Fichier importé',
    import_name: 'Nom d’origine',
    import_path: 'Chemin d’origine',
    import_size: 'Taille',
    import_format: 'Lu comme',
    import_encoding: 'Encodage',
    import_notes: 'Remarques de l’analyseur',
    import_by: 'Importé par',
    import_at: 'Importé le',
    import_download: 'Télécharger l’original',
    import_bytes: '{bytes} octets',
    actor_analyst: 'analyste (navigateur)',
    'actor_labfy import': 'labfy import (ligne de commande)',
    format_text: 'texte', format_html: 'page HTML', format_pdf: 'PDF', format_email: 'courriel', format_mbox: 'boîte de courriels', format_office: 'document bureautique', format_binary: 'binaire (non lu)',
    section_note: 'Ajouter une note',
    in_evidence_one: 'citée dans {n} pièce',
    in_evidence_other: 'citée dans {n} pièces',
    job_progress: 'Avancement',
    job_kind_extraction: 'Extraction des sélecteurs',
    'job_kind_specimen.generate': 'Génération SPECIMEN',
    job_extraction_detail: '{scanned} pièces lues sur {to_scan} · {mentions} mentions · {entities} nouvelles entités',
    extract_start: 'Extraire les sélecteurs',
    edit_heading: 'Modifier l’entité',
    edit_rename: 'Renommer',
    edit_merge_label: 'Fusionner dans l’entité (référence entity:…)',
    edit_merge: 'Fusionner',
    edit_link_label: 'Relier à (référence entity:… ou evidence:…)',
    edit_link: 'Relier',
    edit_delete: 'Supprimer l’entité',
    edit_delete_confirm: 'Confirmer la suppression (ses relations et mentions aussi)',
    edit_renamed: 'Entité renommée ; l’ancien nom reste un alias.',
    edit_merged: 'Entités fusionnées.',
    edit_linked: 'Relation ajoutée.',
    edit_deleted: 'Entité « {name} » supprimée.',
    detail_aliases: 'Alias',
    rel_uses_phone: 'utilise le téléphone',
    extract_help: 'Domaines, URL, courriels, adresses IP, téléphones, IBAN, adresses Bitcoin et Ethereum, services onion, empreintes : trouvés dans le texte des pièces, chaque mention avec sa position.',
    extract_started: 'Extraction lancée.',
    extract_done: 'Extraction terminée : {mentions} mentions, {entities} nouvelles entités.',
    extract_failed: 'L’extraction s’est arrêtée ; elle reprendra au prochain démarrage du serveur.',
    detail_extractor: 'Extracteur',
    detail_version: 'Version de l’extracteur',
    note_title: 'Titre',
    note_content: 'Contenu',
    note_submit: 'Enregistrer la note',
    note_saving: 'Enregistrement de la note…',
    note_saved: 'Note « {title} » enregistrée.',
    note_missing: 'Le titre et le contenu sont obligatoires.',
    note_help: 'La note devient une nouvelle pièce de l’enquête, avec son empreinte SHA-256.',
    evidence_heading: 'Pièce',
    meta_id: 'Identifiant',
    meta_source: 'Source',
    meta_mime: 'Type MIME',
    meta_sha256: 'SHA-256',
    meta_size: 'Taille',
    meta_collected: 'Collectée le',
    meta_created: 'Enregistrée le',
    size_value: '{bytes} octets · {chars} caractères',
    reader_text: 'Texte',
    reader_more: 'Suite',
    reader_progress: '{shown} caractères affichés sur {total}',
    reader_empty: 'Cette pièce ne contient pas de texte.',
    reader_entities: 'Entités mentionnées',
    reader_no_entities: 'Aucune entité extraite de cette pièce.',
    link_neighbours: 'Graphe et voisins',
    link_provenance: 'Provenance',
    link_open_evidence: 'Ouvrir la pièce',
    node_heading: 'Nœud',
    node_details: 'Détails',
    node_degree: 'Degré',
    node_no_details: 'Aucun détail.',
    neighbours: 'Voisins',
    neighbours_count: '{shown} affichés sur {total}',
    neighbours_more: 'Afficher plus',
    neighbours_none: 'Aucun voisin.',
    dir_out: 'relation sortante',
    dir_in: 'relation entrante',
    confidence: 'confiance {v}',
    prov_heading: 'Provenance',
    prov_of: 'Provenance de « {label} »',
    prov_depth: 'Niveau {n}',
    prov_producer: 'Producteur',
    prov_activity: 'Activité',
    prov_time: 'Date',
    prov_inputs: 'Entrées',
    prov_no_inputs: 'aucune',
    prov_truncated: 'Trace tronquée : la profondeur maximale ({n}) est atteinte.',
    prov_empty: 'Aucun enregistrement de provenance.',
    err_api: 'Erreur {status} ({code}) : {message}',
    err_session: 'Session expirée : ouvrez un nouveau lien de connexion (commande « labfy open » dans un terminal).',
    err_rate: 'Trop de modifications à la suite (429) : réessayez dans {s} s.',
    err_network: 'Serveur injoignable : {message}',
    err_timeout: 'Le serveur n’a pas répondu à temps.',
    err_unexpected: 'Réponse inattendue du serveur.',
    detail_source: 'Source',
    detail_sha256: 'SHA-256',
    detail_byte_len: 'Taille (octets)',
    detail_char_len: 'Taille (caractères)',
    detail_collected_at: 'Collectée le',
    detail_created_at: 'Créé le',
    detail_evidence_count: 'Pièces qui le citent',
    detail_summary: 'Résumé',
    detail_form: 'Forme juridique',
    detail_registration: 'Immatriculation',
    detail_name: 'Nom',
    detail_mime: 'Type MIME',
    kind_person: 'personne',
    kind_organisation: 'organisation',
    kind_domain: 'domaine',
    kind_email: 'courriel',
    kind_location: 'lieu',
    kind_phone: 'téléphone',
    kind_url: 'URL',
    kind_ipv4: 'adresse IPv4',
    kind_ipv6: 'adresse IPv6',
    kind_iban: 'IBAN',
    kind_btc_address: 'adresse Bitcoin',
    kind_eth_address: 'adresse Ethereum',
    kind_onion: 'service onion',
    kind_file_hash: 'empreinte de fichier',
    kind_evidence: 'pièce',
    kind_entity: 'entité',
    kind_investigation: 'enquête',
    kind_workspace: 'espace de travail',
    kind_job: 'tâche',
    rel_mentions: 'mentionne',
    rel_works_for: 'travaille pour',
    rel_owns_domain: 'possède le domaine',
    rel_uses_email: 'utilise le courriel',
    rel_located_in: 'situé à',
    rel_linked_to: 'lié à',
    rel_derived_from: 'dérivé de',
    rel_co_mention: 'cité avec',
    list_eyebrow: 'Liste',
    list_title_evidence: 'Pièces',
    list_title_entities: 'Entités',
    list_title_entities_kind: 'Entités : {kind}',
    list_title_relations: 'Relations',
    list_title_relations_kind: 'Relations : {kind}',
    list_col_title: 'Titre',
    list_col_mime: 'Type',
    list_col_size: 'Taille',
    list_col_collected: 'Collectée le',
    list_col_name: 'Nom',
    list_col_pieces: 'Pièces qui la citent',
    list_col_src: 'De',
    list_col_relation: 'Relation',
    list_col_dst: 'Vers',
    list_col_confidence: 'Confiance',
    list_col_producer: 'Établie par',
    list_col_created: 'Créée le',
    list_kind: 'Type',
    list_kind_all: 'Tous',
    list_prefix: 'Commence par',
    list_prefix_title: 'Début du titre…',
    list_prefix_name: 'Début du nom…',
    list_filter: 'Filtrer',
    list_prev: 'Page précédente',
    list_next: 'Page suivante',
    list_range: '{from} à {to} (page {page})',
    list_end: 'fin de la liste',
    list_empty: 'Rien dans cette liste.',
    list_empty_prefix: 'Aucun élément ne commence par « {prefix} ».',
    producer_specimen: 'SPECIMEN',
    producer_analyst: 'analyste',
    'producer_labfy-extract': 'extraction',
    graph_title: 'Graphe',
    graph_roledescription: 'graphe interactif',
    graph_aria: 'Graphe des voisins. Flèches : parcourir les nœuds ; Entrée : déployer ; O : ouvrir la fiche.',
    graph_help: 'Cliquez un nœud pour le déployer. Au clavier : Tab jusqu’au graphe, flèches pour parcourir les nœuds, Entrée pour déployer, O pour ouvrir la fiche. L’épaisseur d’un lien compte les pièces qui citent ses deux bouts.',
    graph_size: 'Taille',
    graph_size_n: '{n} nœuds',
    graph_fit: 'Tout voir',
    graph_reset: 'Réinitialiser',
    graph_filter_kinds: 'Types',
    graph_filter_relations: 'Liens',
    graph_counts: '{nodes} nœuds, {edges} liens',
    graph_left_out: 'non affichés : {list}',
    graph_left_out_expanded: '{n} de plus autour des nœuds déployés',
    graph_capped: 'limite de {n} nœuds atteinte : réinitialisez ou filtrez avant de déployer encore',
    graph_aggregate: '+{n} ({rel})',
    graph_aggregate_hint: 'Voisins non dessinés, comptés ici. Filtrez par type ou choisissez une taille plus grande pour en voir davantage ; la liste à côté les donne tous.',
    graph_select_hint: 'Cliquez un nœud, ou parcourez-les au clavier.',
    graph_expand: 'Déployer',
    graph_open: 'Ouvrir la fiche',
    graph_degree: '{n} liens en tout',
    status_queued: 'en attente',
    status_pending: 'en attente',
    status_running: 'en cours',
    status_done: 'terminée',
    status_succeeded: 'terminée',
    status_completed: 'terminée',
    status_failed: 'en échec',
    status_cancelled: 'annulée',
    status_canceled: 'annulée',
    status_active: 'actif',
    agent_title: 'Agent',
    agent_close: 'Fermer',
    rtd_demo_calls: 'l’agent de démonstration a fait {n} appels par la passerelle',
    rtd_cancelled_by_analyst: 'annulé par l’analyste',
    rtd_runtime_closed: 'le moteur d’agent s’est arrêté',
    rtd_interrupted: 'interrompu par le redémarrage du serveur',
    rtd_start: 'début',
    rtd_resume: 'reprise',
    rtd_driver_demo: 'agent de démonstration',
    rtd_driver_local: 'modèle local',
    rtd_answer_refused: 'réponse refusée : la synthèse est celle de la passerelle',
    rtd_answer_none: 'pas de réponse : la synthèse est celle de la passerelle',
    nav_crumbs: 'Navigation',
    view_links: 'Liens de cette fiche',
    agent_needs_you: 'L’agent attend votre décision',
    agent_local: 'Agent local · {model}',
    agent_unavailable: 'Agent indisponible : {message}',
    agent_question: 'Question à l’agent',
    agent_question_placeholder: 'Ex. : Quels liens entre les sociétés et les domaines ?',
    agent_exclusions: 'Exclusions (facultatif, une par ligne, 8 au plus)',
    agent_readonly: 'Lecture seule : le modèle lit l’enquête sans préparer de recherche web',
    agent_readonly_no_catalog: 'Lecture seule impossible : le catalogue des outils n’est pas chargé.',
    agent_run: 'Lancer',
    agent_review_help: 'L’agent a préparé une recherche web. Rien ne quitte la machine sans votre décision.',
    agent_grant_hosts: 'Hôtes autorisés (un par ligne)',
    agent_grant_requests: 'Requêtes max.',
    agent_grant_bytes: 'Octets max.',
    agent_grant_minutes: 'Expiration (minutes)',
    agent_grant: 'Accorder',
    agent_refuse_reason: 'Motif du refus',
    agent_refuse: 'Refuser',
    agent_resume: 'Reprendre',
    agent_plan: 'Plan',
    agent_results: 'Résultats des outils',
    agent_activity: 'Activité',
    agent_question_count: '{n} / {max} caractères',
    agent_running: 'L’agent travaille…',
    agent_started: 'Tour lancé : {status}.',
    agent_question_missing: 'Saisissez une question.',
    agent_question_too_long: 'La question est limitée à {n} caractères.',
    agent_exclusions_too_many: 'Au plus {n} exclusions (une par ligne).',
    agent_tools: 'Outils du catalogue',
    agent_tools_count: 'Outils du catalogue : {n} ({u} indisponible(s))',
    agent_tool_AVAILABLE: 'disponible',
    agent_tool_UNAVAILABLE: 'indisponible',
    agent_risk_title: 'Niveau de risque déclaré par l’outil',
    agent_review_outbound_risk: 'Risque de la campagne',
    agent_review_outbound_title: 'Récupérer des pages est une action sortante, observable par les sites interrogés',
    agent_review_outbound_why: 'sortante : chaque adresse accordée sera demandée via Tor, observable par le site qui la sert.',
    agent_review_tech: 'Références techniques',
    risk_low: 'faible',
    risk_medium: 'moyen',
    risk_high: 'élevé',
    agent_summary: 'Synthèse de l’agent',
    agent_review: 'Autorisation requise',
    agent_review_loading: 'Chargement de la demande…',
    agent_review_id: 'Demande',
    agent_review_status: 'Statut',
    agent_review_question: 'Question',
    agent_review_selection: 'Sélection',
    agent_review_exclusions: 'Exclusions',
    agent_review_none: 'aucune',
    camp_detail_done: '{done} pages sur {total} récupérées via Tor et conservées comme pièces, {failed} non ; {bytes}',
    camp_detail_none: 'Aucune page récupérée : ses {n} adresses ont échoué ou ont été refusées.',
    camp_detail_revoked: 'Autorisation révoquée par {who} : campagne arrêtée.',
    camp_detail_pressure: 'Arrêtée par le gouverneur de ressources : pression sur la mémoire pendant {n} mesures (détail au survol).',
    camp_detail_lapsed: 'Arrêtée : sa réservation auprès du gouverneur de ressources a expiré sans être renouvelée.',
    camp_detail_governor: 'Arrêtée par le gouverneur de ressources (détail au survol).',
    camp_detail_tor: 'Tor indisponible : rien n’a été récupéré en clair (détail au survol).',
    camp_detail_refused: 'Refusée par le gouverneur de ressources (détail au survol).',
    camp_detail_synthetic: 'Campagne synthétique (SPECIMEN) : {done} pages écrites, {over} hors budget, aucun accès au réseau.',
    camp_detail_synthetic_admitted: 'Campagne synthétique (SPECIMEN) : aucun accès au réseau.',
    agent_review_candidates: 'Adresses proposées',
    candidates_none: 'Aucune adresse trouvée dans la sélection : indiquez vous-même celles à récupérer.',
    candidates_help: 'Trouvées dans la sélection et déjà reprises dans le formulaire ci-dessous : modifiez-les librement, seule votre liste finale sera autorisée.',
    candidates_more_one: '… et {n} autre adresse trouvée, non listée.',
    candidates_more_other: '… et {n} autres adresses trouvées, non listées.',
    candidates_skipped_one: '{n} valeur écartée',
    candidates_skipped_other: '{n} valeurs écartées',
    cand_why: '{why} : ',
    cand_evidence_text: 'écrite dans la pièce',
    cand_evidence_domain: 'domaine cité dans la pièce',
    cand_entity_url: 'adresse sélectionnée',
    cand_entity_domain: 'site du domaine sélectionné',
    cand_email_domain: 'domaine de l’adresse e-mail',
    cand_linked: 'lié à la sélection (« {relation} »)',
    cand_co_mentioned: 'cité avec la sélection dans les mêmes pièces',
    skip_unparsable: 'adresse illisible',
    skip_too_long: 'adresse trop longue',
    skip_scheme: 'protocole « {detail} » : seuls http et https sont récupérés',
    skip_credentials: 'contient un identifiant ou un mot de passe',
    skip_private_address: 'adresse non publique ({detail})',
    skip_ipv6: 'adresse IPv6 : aucun périmètre ne peut la contenir',
    skip_not_public: 'nom absent de l’Internet public',
    skip_onion: 'adresse onion ({detail}) : aucun service ne peut l’avoir',
    skip_mixed_scripts: 'mélange d’écritures dans « {detail} » (usurpation possible)',
    skip_homograph: 'imite « {detail} » avec d’autres lettres (homographe)',
    skip_excluded: 'écartée par l’exclusion « {detail} »',
    addr_loopback: 'boucle locale',
    addr_private: 'réseau privé',
    addr_link_local: 'lien local',
    addr_unspecified: 'non spécifiée',
    addr_reserved: 'réservée ou multidiffusion',
    addr_documentation: 'réservée à la documentation',
    addr_shared: 'partagée par un opérateur',
    addr_benchmarking: 'réservée aux mesures de performance',
    onion_not_v3: 'pas une adresse v3 ; les adresses v2 ne sont plus servies',
    onion_bad_checksum: 'somme de contrôle fausse',
    agent_review_risk: 'Risque de la préparation',
    agent_review_fingerprint: 'Empreinte du contrat',
    agent_review_fingerprint_stale: 'Le contrat de l’outil a changé depuis la préparation : cette demande est périmée.',
    agent_review_requested_by: 'Demandée par',
    agent_review_created: 'Préparée le',
    agent_review_campaign: 'Campagne',
    agent_review_synthetic: 'synthétique, aucun réseau',
    agent_review_note: 'Motif',
    agent_grant_urls: 'Adresses à récupérer (une par ligne, 32 au plus)',
    agent_grant_urls_help: 'Espace RÉEL : seules ces adresses seront demandées, via Tor, chacune dans le périmètre des hôtes autorisés.',
    agent_grant_urls_missing: 'Indiquez au moins une adresse à récupérer.',
    agent_grant_urls_too_many: 'Au plus {n} adresses.',
    agent_resume_after_campaign: 'La campagne n’est pas terminée : la reprise du tour sera proposée à sa fin.',
    agent_revoke: 'Révoquer l’autorisation',
    agent_revoking: 'Révocation de l’autorisation…',
    agent_revoked: 'Autorisation révoquée : sa campagne est arrêtée, rien de plus ne sera récupéré.',
    fetch_heading: 'Récupération via Tor',
    fetch_url: 'Adresse demandée',
    fetch_final_url: 'Adresse finale',
    fetch_redirects: 'Redirections',
    fetch_http: 'Statut HTTP',
    fetch_content_type: 'Content-Type reçu',
    fetch_started: 'Début',
    fetch_elapsed: 'Durée',
    fetch_elapsed_value: '{ms} ms',
    fetch_isolation: 'Isolation Tor',
    fetch_route: 'Chemin dans Tor',
    route_exit: 'par un relais de sortie Tor',
    route_onion_service: 'service onion : de bout en bout dans Tor, sans relais de sortie',
    fetch_campaign: 'Campagne',
    fetch_grant: 'Autorisation',
    fetch_headers: 'En-têtes conservés',
    camp_PENDING: 'en attente d’admission',
    camp_CONFIRMING: 'en attente de votre confirmation',
    camp_ADMITTED: 'admise',
    camp_RUNNING: 'en cours',
    camp_COMPLETED: 'terminée',
    camp_FAILED: 'en échec',
    camp_STOPPED: 'arrêtée',
    camp_progress: '{done} récupérée(s), {failed} en échec, {rest} restante(s) sur {total} · {bytes} · {elapsed}',
    camp_progress_label: 'Avancement de la campagne : {done} récupérée(s), {failed} en échec, {rest} restante(s)',
    camp_elapsed: 'durée {s} s',
    camp_not_started: 'pas encore démarrée',
    camp_col_pos: 'N°',
    camp_col_url: 'Adresse (motif)',
    camp_col_status: 'Statut',
    camp_open_evidence: 'ouvrir',
    camp_col_http: 'HTTP',
    camp_col_bytes: 'Octets',
    camp_col_evidence: 'Pièce',
    item_PLANNED: 'prévue',
    item_FETCHED: 'récupérée',
    item_FAILED: 'en échec',
    item_REFUSED: 'refusée',
    item_UNAVAILABLE: 'indisponible',
    item_STOPPED: 'arrêtée',
    egress_loading: 'Tor : interrogation…',
    egress_ready: 'Tor : prêt',
    egress_bootstrap: 'Tor : amorçage {p} % — {phase}',
    egress_error_reported: 'erreur signalée (détail au survol)',
    egress_arti_error: 'Dernière erreur du client Tor (arti, en anglais) : {error}',
    egress_unavailable: 'Tor : indisponible — {reason}',
    egress_poll_error: 'Tor : état inconnu — {message}',
    egress_title: 'Le seul réseau du poste passe par Tor (processus egress). En cours : {n} · récupérées {fetched}, refusées {refused}, indisponibles {unavailable}, en échec {failed}, arrêtées {stopped}.',
    agent_grant_hosts_missing: 'Indiquez au moins un hôte.',
    agent_grant_hosts_too_many: 'Au plus {n} hôtes.',
    agent_grant_number: '« {field} » doit être un nombre entier positif.',
    agent_granting: 'Enregistrement de l’autorisation…',
    agent_granted: 'Autorisation accordée ({grant}), campagne {campaign}. Reprenez le tour pour obtenir la synthèse.',
    agent_granted_confirm: 'Autorisation enregistrée ({grant}). Confirmez-la hors du serveur pour lancer la campagne {campaign}.',
    confirm_title: 'Confirmation requise hors du serveur',
    flog_title: 'Journal d’egress : {n} demande(s), tenu par le processus de sortie, hors de portée de ce serveur',
    flog_col_time: 'Heure',
    flog_col_url: 'Adresse (motif)',
    flog_unavailable: 'Journal d’egress indisponible : {detail}',
    confirm_why: 'Rien ne quitte la machine avant que vous confirmiez ces adresses sur la page de confirmation, servie par le processus de sortie (egress) que ce serveur ne peut ni afficher ni cliquer, ou au terminal.',
    confirm_open: 'Ouvrir la page de confirmation',
    confirm_terminal: 'Ou, au terminal :',
    confirm_unavailable: 'Le processus de sortie (egress) ne répond pas : la confirmation est impossible pour l’instant.',
    agent_refuse_missing: 'Indiquez le motif du refus.',
    agent_refusing: 'Enregistrement du refus…',
    agent_refused: 'Recherche refusée. Reprenez le tour pour le clore.',
    agent_decided: 'Décision enregistrée ({status}) : reprenez le tour.',
    agent_resuming: 'Reprise du tour…',
    agent_resumed: 'Tour repris : {status}.',
    agent_plan_progress: '{done} / {total} étapes faites',
    agent_card_open: 'Voir le résultat',
    agent_card_close: 'Masquer',
    agent_card_diagnostic: 'Diagnostic',
    agent_result_loading: 'Chargement du résultat…',
    agent_result_refs: 'Objets',
    agent_result_provenance: 'Provenance',
    agent_result_none: 'aucun',
    agent_result_untrusted: 'données non fiables, affichées comme texte',
    agent_result_trusted: 'données Labfy',
    agent_result_truncated: '… (aperçu tronqué)',
    rtd_tool_result: '{tool} : {status}',
    rtd_turn_end: '{status} : {detail}',
    sbx_program: 'Programme',
    sbx_end: 'Fin',
    sbx_end_exited: 'terminé, code {code}',
    sbx_end_signalled: 'arrêté par le signal {signal}',
    sbx_end_stopped: 'arrêté par le gouverneur : {reason}',
    sbx_usage: 'Ressources',
    sbx_usage_line: '{ms} ms · mémoire max {mem} · CPU {cpu} ms',
    sbx_inputs: 'Entrées',
    sbx_stdout: 'Sortie standard',
    sbx_stderr: 'Sortie d’erreur',
    sbx_stream_cut: '… ({bytes} écrits en tout ; seul le début est gardé)',
    sbx_empty: '(vide)',
    sbx_files: 'Fichiers laissés dans /work (non enregistrés)',
    sbx_files_more: '{n} autre(s) fichier(s) non listé(s)',
    sbx_no_text: '(contenu binaire ou trop grand : seule l’empreinte est gardée)',
    agent_missed: 'Des événements plus anciens ont été évincés du journal de l’agent.',
    agent_poll_stopped: 'Suivi de l’agent interrompu : {message}',
    agent_poll_retry: 'Reprendre le suivi',
    agent_demo: 'Agent de démonstration déterministe',
    agent_mode_detail: '{label} : {detail}',
    agent_mode_closed: '{label} — arrêté',
    agent_cancel: 'Annuler',
    agent_cancelling: 'Annulation du tour…',
    agent_cancelled: 'Tour annulé.',
    agent_counters: 'Tours de modèle : {rounds} · appels d’outils : {calls} · réparations : {repairs}',
    agent_turn_lost: 'Ce tour n’est plus suivi par le serveur (évincé ou serveur redémarré).',
    agent_resume_queued: 'Reprise demandée : {status}.',
    agent_resume_refused: 'Reprise refusée : {message}',
    agent_end_CANCELLED: 'Tour annulé : {message}',
    agent_end_FAILED: 'Le tour a échoué : {message}',
    agent_end_MODEL_UNAVAILABLE: 'Le modèle local n’a pas répondu : {message}',
    agent_end_MODEL_PROTOCOL_ERROR: 'Le modèle n’a pas respecté le format de réponse : {message}',
    agent_end_BUDGET_EXHAUSTED: 'Le budget du tour est épuisé : {message}',
    turn_QUEUED: 'en file d’attente',
    turn_RUNNING: 'en cours',
    turn_AUTHORIZATION_REQUIRED: 'autorisation requise',
    turn_COMPLETED: 'terminé',
    turn_FAILED: 'en échec',
    turn_CANCELLED: 'annulé',
    turn_MODEL_UNAVAILABLE: 'modèle indisponible',
    turn_MODEL_PROTOCOL_ERROR: 'erreur de protocole du modèle',
    turn_BUDGET_EXHAUSTED: 'budget épuisé',
    rs_COMPLETED: 'terminé',
    rs_FAILED: 'en échec',
    rs_DENIED: 'refusé',
    rs_AUTHORIZATION_REQUIRED: 'autorisation requise',
    rs_UNAVAILABLE: 'indisponible',
    rs_CANCELLED: 'annulé',
    req_PENDING: 'en attente de décision',
    req_GRANTED: 'accordée',
    req_REFUSED: 'refusée',
    req_VOID: 'périmée (contrat modifié)',
    'ev_agent.turn.started': 'Tour démarré',
    'ev_agent.plan.updated': 'Plan mis à jour',
    'ev_agent.tool.requested': 'Outil demandé',
    'ev_agent.tool.started': 'Outil lancé',
    'ev_agent.tool.completed': 'Résultat d’outil',
    'ev_agent.authorization.required': 'Autorisation requise',
    'ev_agent.turn.completed': 'Tour terminé',
    'ev_agent.error': 'Erreur',
    'evrt_turn.queued': 'Tour en file',
    'evrt_turn.running': 'Tour pris en charge',
    'evrt_model.answer': 'Réponse du modèle',
    'evrt_model.repair': 'Réparation demandée au modèle',
    'evrt_model.context': 'Contexte du modèle plein : conclusion',
    'evrt_tool.call': 'Appel d’outil',
    'evrt_tool.result': 'Résultat d’outil',
    'evrt_turn.paused': 'Tour en pause',
    'evrt_turn.resume_refused': 'Reprise refusée',
    'evrt_turn.completed': 'Tour terminé',
    'evrt_turn.failed': 'Tour arrêté',
    'evrt_turn.cancelled': 'Tour annulé',
    // Resources panel (SPEC Q5)
    res_title: 'Ressources',
    res_loading: 'Interrogation du gouverneur…',
    res_unavailable: 'Gouverneur indisponible : {detail}',
    res_unavailable_short: 'indisponible',
    res_no_sample: 'Le gouverneur n’a pas encore d’échantillon.',
    res_sample: 'Échantillon de {time} · période {period} s · {n} point(s) en mémoire',
    res_sample_old: 'Échantillon ancien ({age} s) : le gouverneur n’échantillonne plus ?',
    res_poll_stopped: 'Suivi des ressources interrompu : {message}',
    res_poll_retry: 'Reprendre le suivi',
    res_chart_label: 'Utilisation des ressources sur les {n} dernières minutes, en pourcentage du total',
    res_now: 'maintenant',
    res_ago_min: '−{n} min',
    res_legend_reserved: 'tirets : usage + ce que les réservations peuvent encore prendre (réservé − pic mesuré, tout le réservé tant que rien n’est mesuré)',
    res_legend_stale: 'courbes grisées : pas de donnée fraîche',
    res_series_ram: 'RAM',
    res_series_swap: 'Swap',
    res_series_vram: 'VRAM',
    res_series_gtt: 'GTT',
    res_series_scratch: 'Scratch (Labfy)',
    res_amount_ram: 'RAM',
    res_amount_swap: 'Swap',
    res_amount_vram: 'VRAM',
    res_amount_scratch: 'Scratch',
    res_figures: 'Valeurs actuelles',
    res_col_resource: 'Ressource',
    res_col_used: 'Utilisé',
    res_col_total: 'Total',
    res_col_share: 'Part',
    res_col_reserved: 'Réservé',
    res_col_admissible: 'Admissible',
    res_scratch_free: '{path} · libre : {free}',
    res_no_swap: 'aucun swap configuré',
    res_psi: 'Pression mémoire (PSI, moy. 10 s) : some {some} · full {full}',
    res_psi_none: 'Pression mémoire (PSI) : non fournie par le noyau.',
    res_gpus: 'GPU',
    res_no_gpu: 'Aucun GPU détecté.',
    res_col_gpu: 'GPU',
    res_col_vram: 'VRAM',
    res_col_gtt: 'GTT',
    res_col_busy: 'Activité',
    res_col_temp: 'Temp.',
    res_col_power: 'Puissance',
    res_col_source: 'Source',
    res_uma: 'APU (mémoire partagée)',
    res_facts: 'Constats du gouverneur',
    res_no_facts: 'Aucun constat.',
    res_pressure: 'Admissions suspendues : {reason}',
    res_no_confinement: 'Aucun confinement : le gouverneur ne peut pas créer de cgroups ici, et refuse donc tout lancement du modèle local et toute exécution en bac à sable. Raison donnée par le gouverneur :',
    res_no_confinement_hint: 'L’opérateur trouvera la marche à suivre dans le guide d’exploitation, section « cgroups ».',
    res_reservations: 'Réservations',
    res_no_reservations: 'Aucune réservation.',
    res_col_owner: 'Titulaire',
    res_col_kind: 'Type',
    res_col_peak: 'Pic mesuré',
    res_col_priority: 'Priorité',
    res_col_lease: 'Bail',
    res_lease_process: 'tant que le processus vit',
    res_kind_model: 'modèle',
    res_kind_campaign: 'campagne',
    res_kind_sandbox: 'exécution en bac à sable',
    res_model: 'Modèle local',
    res_model_state: 'État',
    res_model_endpoint: 'Point d’accès',
    res_model_estimate: 'Estimation réservée',
    res_model_estimate_parts: 'poids {weights} · cache KV {kv} · surcoût {overhead} · contexte {ctx}',
    res_model_peak: 'Pic mémoire mesuré',
    res_model_restarts: 'Redémarrages',
    res_model_detail: 'Dernier événement',
    res_log: 'Journal d’admission',
    res_no_decisions: 'Aucune décision.',
    res_col_time: 'Heure',
    res_col_decision: 'Décision',
    res_col_asked: 'Demandé',
    res_col_reason: 'Motif',
    res_col_blocked: 'Bloqué par',
    res_outcome_admitted: 'admis',
    res_outcome_refused: 'refusé',
    res_outcome_released: 'libéré',
    res_outcome_lapsed: 'bail expiré',
    res_outcome_stopped: 'arrêté',
    res_none: '—',
  },
  en: {
    lang_group: 'Language',
    class_SPECIMEN: 'SPECIMEN — synthetic data',
    class_REAL: 'REAL',
    isolated: 'network-isolated',
    not_isolated: 'NOT ISOLATED',
    missing_protections: 'missing protections:',
    missing_landlock: 'Landlock',
    missing_seccomp: 'system-call filter',
    missing_proc: 'private /proc',
    investigation_label: 'Investigation',
    search_label: 'Search the evidence',
    search_placeholder: 'Words, name, domain…',
    search_button: 'Search',
    search_hint: 'Type a term to search this investigation’s evidence.',
    search_loading: 'Searching for “{q}”…',
    search_hits_one: '{n} result for “{q}”',
    search_hits_other: '{n} results for “{q}”',
    search_none: 'No results for “{q}”.',
    search_truncated: 'List truncated: refine the search.',
    search_ranked_among: 'Very broad search: only the {n} most recent matching items are ranked. Refine it to rank them all.',
    search_too_long: 'Searches are limited to {n} characters.',
    search_no_investigation: 'No open investigation: cannot search.',
    nav_overview: 'Overview',
    nav_cases: 'Investigations',
    cases_heading: 'Investigations of the workspace',
    cases_new: 'New investigation',
    cases_title: 'Title',
    cases_summary: 'Summary (optional)',
    cases_create: 'Create the investigation',
    cases_created: 'Investigation “{title}” created.',
    cases_missing_title: 'The title is required.',
    cases_open: 'Open',
    cases_rename: 'Rename',
    cases_save: 'Save',
    cases_cancel: 'Cancel',
    cases_archive: 'Archive',
    cases_unarchive: 'Bring back',
    cases_archived: 'archived',
    cases_current: 'open',
    cases_archived_done: 'Investigation “{title}” archived: it is kept whole and can be brought back.',
    cases_unarchived_done: 'Investigation “{title}” brought back.',
    cases_renamed: 'Investigation renamed “{title}”.',
    cases_items_one: '{n} item',
    cases_items_other: '{n} items',
    cases_workspace: 'Workspace',
    cases_workspace_name: 'Workspace name',
    cases_workspace_renamed: 'Workspace renamed “{name}”.',
    cases_new_workspace: 'New REAL workspace',
    cases_new_workspace_help: 'A server serves one workspace at a time, isolated from the network. Open the new workspace from the list of workspaces: Labfy then restarts the server on it.',
    cases_workspace_create: 'Create the workspace',
    cases_workspace_created: 'Workspace “{name}” created. Open it from the list of workspaces.',
    cases_workspaces: 'Workspaces',
    cases_ws_open: 'Open this workspace',
    cases_ws_current: 'open',
    cases_ws_archived: 'archived',
    cases_ws_generating: 'being prepared',
    cases_ws_investigations_one: '{n} investigation',
    cases_ws_investigations_other: '{n} investigations',
    cases_ws_archived_done: 'Workspace “{name}” archived: it is kept whole and can be brought back.',
    cases_ws_unarchived_done: 'Workspace “{name}” brought back.',
    switch_heading: 'Opening the workspace “{name}”',
    switch_wait: 'Labfy is restarting the server on this workspace. The page reloads by itself in a few seconds.',
    switch_failed: 'The workspace “{name}” did not open. Labfy’s log says why; the previous workspace is still served.',
    switch_reload: 'Reload the page',
    loading: 'Loading…',
    empty: 'Nothing to show.',
    unknown_route: 'Unknown page: back to the overview.',
    view_failed: 'This page could not be loaded (see the message above).',
    back_overview: 'Back to the overview',
    no_workspace: 'No workspace for this session.',
    no_investigation: 'No investigation in this workspace.',
    overview_heading: 'Investigation',
    created_label: 'Created',
    counts_heading: 'Volumes',
    count_evidence: 'Evidence',
    count_entities: 'Entities',
    count_relations: 'Relations',
    count_provenance: 'Provenance records',
    count_jobs: 'Jobs',
    section_entity_kinds: 'Entity kinds',
    section_top_entities: 'Top entities',
    section_correlations: 'Entities shared across evidence',
    section_recent_evidence: 'Recent evidence',
    section_jobs: 'Jobs',
    section_processes: 'Processes',
    role_server: 'workspace server',
    role_governor: 'resource governor',
    role_egress: 'egress (Tor)',
    processes_none: 'Not supervised: {detail}',
    restarts: '{n} restart(s)',
    proc_state_starting: 'starting',
    proc_state_healthy: 'running',
    proc_state_unhealthy: 'not answering',
    proc_state_restarting: 'restarting',
    proc_state_switching: 'switching workspace',
    proc_state_failed: 'given up',
    proc_state_stopping: 'stopping',
    proc_state_stopped: 'stopped',
    proc_not_ready: 'not ready',
    proc_detail: 'Process detail',
    section_export: 'Export the investigation',
    export_help: 'A verifiable bundle: evidence and originals, entities, relations, provenance, grants, the audit log, a STIX 2.1 graph, SHA-256 hashes and a manifest. Hand its fingerprint over separately: the recipient checks it offline.',
    export_start: 'Export',
    export_running: 'Exporting…',
    export_done: 'Export finished: {files} files.',
    export_failed: 'The export failed: {reason}',
    export_fingerprint: 'Bundle fingerprint',
    export_dir: 'Folder on this machine',
    export_download: 'Download the archive (.tar)',
    export_verify: 'To verify',
    job_kind_export: 'Investigation export',
    section_import: 'Import files',
    import_drop: 'Drop files or a folder here',
    import_or: 'or',
    import_pick_files: 'Choose files',
    import_pick_folder: 'Choose a folder',
    import_help: 'Text (any common encoding), HTML, PDF, .eml messages and .mbox mailboxes (attachments and messages become linked evidence), office documents; anything else is kept as it is. Originals are kept and fingerprinted (SHA-256), read by a confined parser, then their selectors are extracted.',
    import_sending: 'Sending: {done} of {total} files · {sent} of {bytes}',
    import_reading: 'The confined parser is reading the files received…',
    import_done: 'Import finished: {counts}.',
    import_n_imported_one: '{n} imported', import_n_imported_other: '{n} imported',
    import_n_duplicates_one: '{n} duplicate', import_n_duplicates_other: '{n} duplicates',
    import_n_refused_one: '{n} refused', import_n_refused_other: '{n} refused',
    import_n_embedded_one: '{n} embedded document', import_n_embedded_other: '{n} embedded documents',
    import_failed: 'The import stopped: {reason}',
    import_outcome_imported: 'imported',
    import_outcome_duplicate: 'already here',
    import_outcome_refused: 'refused',
    import_report: 'File by file',
    job_kind_import: 'File import',
    import_n_files_one: '{n} file', import_n_files_other: '{n} files',
    import_heading: 'Imported file',
    import_name: 'Original name',
    import_path: 'Original path',
    import_size: 'Size',
    import_format: 'Read as',
    import_encoding: 'Encoding',
    import_notes: 'Parser notes',
    import_by: 'Imported by',
    import_at: 'Imported at',
    import_download: 'Download the original',
    import_bytes: '{bytes} bytes',
    actor_analyst: 'analyst (browser)',
    'actor_labfy import': 'labfy import (command line)',
    format_text: 'text', format_html: 'HTML page', format_pdf: 'PDF', format_email: 'e-mail', format_mbox: 'mailbox', format_office: 'office document', format_binary: 'binary (not read)',
    section_note: 'Add a note',
    in_evidence_one: 'in {n} evidence item',
    in_evidence_other: 'in {n} evidence items',
    job_progress: 'Progress',
    job_kind_extraction: 'Selector extraction',
    'job_kind_specimen.generate': 'SPECIMEN generation',
    job_extraction_detail: '{scanned} of {to_scan} evidence items read · {mentions} mentions · {entities} new entities',
    extract_start: 'Extract selectors',
    edit_heading: 'Edit the entity',
    edit_rename: 'Rename',
    edit_merge_label: 'Merge into the entity (reference entity:…)',
    edit_merge: 'Merge',
    edit_link_label: 'Link to (reference entity:… or evidence:…)',
    edit_link: 'Link',
    edit_delete: 'Delete the entity',
    edit_delete_confirm: 'Confirm the deletion (its relations and mentions too)',
    edit_renamed: 'Entity renamed; the former name stays an alias.',
    edit_merged: 'Entities merged.',
    edit_linked: 'Relation added.',
    edit_deleted: 'Entity “{name}” deleted.',
    detail_aliases: 'Aliases',
    rel_uses_phone: 'uses phone',
    extract_help: 'Domains, URLs, e-mail and IP addresses, phone numbers, IBANs, Bitcoin and Ethereum addresses, onion services, hashes: found in the evidence text, each mention with its position.',
    extract_started: 'Extraction started.',
    extract_done: 'Extraction finished: {mentions} mentions, {entities} new entities.',
    extract_failed: 'The extraction stopped; it resumes when the server next starts.',
    detail_extractor: 'Extractor',
    detail_version: 'Extractor version',
    note_title: 'Title',
    note_content: 'Content',
    note_submit: 'Save note',
    note_saving: 'Saving the note…',
    note_saved: 'Note “{title}” saved.',
    note_missing: 'Title and content are required.',
    note_help: 'The note becomes a new evidence item of the investigation, with its SHA-256 fingerprint.',
    evidence_heading: 'Evidence',
    meta_id: 'Identifier',
    meta_source: 'Source',
    meta_mime: 'MIME type',
    meta_sha256: 'SHA-256',
    meta_size: 'Size',
    meta_collected: 'Collected',
    meta_created: 'Recorded',
    size_value: '{bytes} bytes · {chars} characters',
    reader_text: 'Text',
    reader_more: 'More',
    reader_progress: '{shown} of {total} characters shown',
    reader_empty: 'This evidence item has no text.',
    reader_entities: 'Entities mentioned',
    reader_no_entities: 'No entity extracted from this evidence.',
    link_neighbours: 'Graph and neighbours',
    link_provenance: 'Provenance',
    link_open_evidence: 'Open evidence',
    node_heading: 'Node',
    node_details: 'Details',
    node_degree: 'Degree',
    node_no_details: 'No details.',
    neighbours: 'Neighbours',
    neighbours_count: '{shown} shown of {total}',
    neighbours_more: 'Show more',
    neighbours_none: 'No neighbours.',
    dir_out: 'outgoing relation',
    dir_in: 'incoming relation',
    confidence: 'confidence {v}',
    prov_heading: 'Provenance',
    prov_of: 'Provenance of “{label}”',
    prov_depth: 'Depth {n}',
    prov_producer: 'Producer',
    prov_activity: 'Activity',
    prov_time: 'Time',
    prov_inputs: 'Inputs',
    prov_no_inputs: 'none',
    prov_truncated: 'Trail truncated: the maximum depth ({n}) was reached.',
    prov_empty: 'No provenance record.',
    err_api: 'Error {status} ({code}): {message}',
    err_session: 'Session expired: open a new login link (run `labfy open` in a terminal).',
    err_rate: 'Too many changes in a row (429): retry in {s} s.',
    err_network: 'Server unreachable: {message}',
    err_timeout: 'The server did not answer in time.',
    err_unexpected: 'Unexpected answer from the server.',
    detail_source: 'Source',
    detail_sha256: 'SHA-256',
    detail_byte_len: 'Size (bytes)',
    detail_char_len: 'Size (characters)',
    detail_collected_at: 'Collected',
    detail_created_at: 'Created',
    detail_evidence_count: 'Evidence citing it',
    detail_summary: 'Summary',
    detail_form: 'Legal form',
    detail_registration: 'Registration',
    detail_name: 'Name',
    detail_mime: 'MIME type',
    kind_person: 'person',
    kind_organisation: 'organisation',
    kind_domain: 'domain',
    kind_email: 'email',
    kind_location: 'location',
    kind_phone: 'phone',
    kind_url: 'URL',
    kind_ipv4: 'IPv4 address',
    kind_ipv6: 'IPv6 address',
    kind_iban: 'IBAN',
    kind_btc_address: 'Bitcoin address',
    kind_eth_address: 'Ethereum address',
    kind_onion: 'onion service',
    kind_file_hash: 'file hash',
    kind_evidence: 'evidence',
    kind_entity: 'entity',
    kind_investigation: 'investigation',
    kind_workspace: 'workspace',
    kind_job: 'job',
    rel_mentions: 'mentions',
    rel_works_for: 'works for',
    rel_owns_domain: 'owns domain',
    rel_uses_email: 'uses email',
    rel_located_in: 'located in',
    rel_linked_to: 'linked to',
    rel_derived_from: 'derived from',
    rel_co_mention: 'named with',
    list_eyebrow: 'List',
    list_title_evidence: 'Evidence',
    list_title_entities: 'Entities',
    list_title_entities_kind: 'Entities: {kind}',
    list_title_relations: 'Relations',
    list_title_relations_kind: 'Relations: {kind}',
    list_col_title: 'Title',
    list_col_mime: 'Type',
    list_col_size: 'Size',
    list_col_collected: 'Collected',
    list_col_name: 'Name',
    list_col_pieces: 'Pieces naming it',
    list_col_src: 'From',
    list_col_relation: 'Relation',
    list_col_dst: 'To',
    list_col_confidence: 'Confidence',
    list_col_producer: 'Made by',
    list_col_created: 'Created',
    list_kind: 'Kind',
    list_kind_all: 'All',
    list_prefix: 'Starts with',
    list_prefix_title: 'Start of the title…',
    list_prefix_name: 'Start of the name…',
    list_filter: 'Filter',
    list_prev: 'Previous page',
    list_next: 'Next page',
    list_range: '{from} to {to} (page {page})',
    list_end: 'end of the list',
    list_empty: 'Nothing in this list.',
    list_empty_prefix: 'Nothing starts with “{prefix}”.',
    producer_specimen: 'SPECIMEN',
    producer_analyst: 'analyst',
    'producer_labfy-extract': 'extraction',
    graph_title: 'Graph',
    graph_roledescription: 'interactive graph',
    graph_aria: 'Graph of the neighbours. Arrows: walk the nodes; Enter: expand; O: open the page.',
    graph_help: 'Click a node to expand it. With the keyboard: Tab to the graph, arrows to walk the nodes, Enter to expand, O to open the page. A link’s thickness counts the pieces that name both its ends.',
    graph_size: 'Size',
    graph_size_n: '{n} nodes',
    graph_fit: 'Fit',
    graph_reset: 'Reset',
    graph_filter_kinds: 'Kinds',
    graph_filter_relations: 'Links',
    graph_counts: '{nodes} nodes, {edges} links',
    graph_left_out: 'not drawn: {list}',
    graph_left_out_expanded: '{n} more around the expanded nodes',
    graph_capped: 'limit of {n} nodes reached: reset or filter before expanding further',
    graph_aggregate: '+{n} ({rel})',
    graph_aggregate_hint: 'Neighbours not drawn, counted here. Filter by kind or choose a larger size to see more of them; the list beside gives them all.',
    graph_select_hint: 'Click a node, or walk them with the keyboard.',
    graph_expand: 'Expand',
    graph_open: 'Open the page',
    graph_degree: '{n} links in all',
    status_queued: 'queued',
    status_pending: 'pending',
    status_running: 'running',
    status_done: 'done',
    status_succeeded: 'succeeded',
    status_completed: 'completed',
    status_failed: 'failed',
    status_cancelled: 'cancelled',
    status_canceled: 'cancelled',
    status_active: 'active',
    agent_title: 'Agent',
    agent_close: 'Close',
    rtd_demo_calls: 'the demo agent made {n} calls through the gateway',
    rtd_cancelled_by_analyst: 'cancelled by the analyst',
    rtd_runtime_closed: 'the agent runtime closed',
    rtd_interrupted: 'interrupted by a restart of the server',
    rtd_start: 'start',
    rtd_resume: 'resume',
    rtd_driver_demo: 'demo agent',
    rtd_driver_local: 'local model',
    rtd_answer_refused: 'answer refused: the summary is the gateway’s',
    rtd_answer_none: 'no answer: the summary is the gateway’s',
    nav_crumbs: 'Navigation',
    view_links: 'Links of this page',
    agent_needs_you: 'The agent is waiting for your decision',
    agent_local: 'Local agent · {model}',
    agent_unavailable: 'Agent unavailable: {message}',
    agent_question: 'Question for the agent',
    agent_question_placeholder: 'E.g.: How are the companies and the domains linked?',
    agent_question_count: '{n} / {max} characters',
    agent_exclusions: 'Exclusions (optional, one per line, at most 8)',
    agent_readonly: 'Read only: the model reads the investigation without preparing web research',
    agent_readonly_no_catalog: 'Read only is not possible: the tool catalog is not loaded.',
    agent_run: 'Run',
    agent_running: 'The agent is working…',
    agent_started: 'Turn started: {status}.',
    agent_question_missing: 'Type a question.',
    agent_question_too_long: 'Questions are limited to {n} characters.',
    agent_exclusions_too_many: 'At most {n} exclusions (one per line).',
    agent_tools: 'Catalog tools',
    agent_tools_count: 'Catalog tools: {n} ({u} unavailable)',
    agent_tool_AVAILABLE: 'available',
    agent_tool_UNAVAILABLE: 'unavailable',
    agent_risk_title: 'Risk level the tool declares',
    agent_review_outbound_risk: 'Campaign risk',
    agent_review_outbound_title: 'Fetching pages is an outbound action, observable by the sites asked',
    agent_review_outbound_why: 'outbound: each granted address will be asked for through Tor, observable by the site that serves it.',
    agent_review_tech: 'Technical references',
    risk_low: 'low',
    risk_medium: 'medium',
    risk_high: 'high',
    agent_summary: 'Agent summary',
    agent_review: 'Authorization required',
    agent_review_help: 'The agent prepared a web research. Nothing leaves the machine without your decision.',
    agent_review_loading: 'Loading the request…',
    agent_review_id: 'Request',
    agent_review_status: 'Status',
    agent_review_question: 'Question',
    agent_review_selection: 'Selection',
    agent_review_exclusions: 'Exclusions',
    agent_review_none: 'none',
    camp_detail_done: '{done} of {total} pages fetched through Tor and kept as evidence, {failed} not; {bytes}',
    camp_detail_none: 'No page fetched: its {n} addresses failed or were refused.',
    camp_detail_revoked: 'Authorization revoked by {who}: campaign stopped.',
    camp_detail_pressure: 'Stopped by the resource governor: memory pressure for {n} samples (details on hover).',
    camp_detail_lapsed: 'Stopped: its reservation with the resource governor expired without renewal.',
    camp_detail_governor: 'Stopped by the resource governor (details on hover).',
    camp_detail_tor: 'Tor unavailable: nothing was fetched in the clear (details on hover).',
    camp_detail_refused: 'Refused by the resource governor (details on hover).',
    camp_detail_synthetic: 'Synthetic campaign (SPECIMEN): {done} pages written, {over} over budget, no network access.',
    camp_detail_synthetic_admitted: 'Synthetic campaign (SPECIMEN): no network access.',
    agent_review_candidates: 'Proposed addresses',
    candidates_none: 'No address found in the selection: list the ones to fetch yourself.',
    candidates_help: 'Found in the selection and already copied into the form below: edit them freely, only your final list is granted.',
    candidates_more_one: '… and {n} more address found, not listed.',
    candidates_more_other: '… and {n} more addresses found, not listed.',
    candidates_skipped_one: '{n} value left out',
    candidates_skipped_other: '{n} values left out',
    cand_why: '{why}: ',
    cand_evidence_text: 'written in the item',
    cand_evidence_domain: 'domain named in the item',
    cand_entity_url: 'selected address',
    cand_entity_domain: 'site of the selected domain',
    cand_email_domain: 'domain of the e-mail address',
    cand_linked: 'linked to the selection (“{relation}”)',
    cand_co_mentioned: 'named with the selection in the same items',
    skip_unparsable: 'unreadable address',
    skip_too_long: 'address too long',
    skip_scheme: 'scheme “{detail}”: only http and https are fetched',
    skip_credentials: 'carries a user name or password',
    skip_private_address: 'not a public address ({detail})',
    skip_ipv6: 'IPv6 address: no scope can hold it',
    skip_not_public: 'name not on the public Internet',
    skip_onion: 'onion address ({detail}): no service can have it',
    skip_mixed_scripts: 'mixes scripts in “{detail}” (possible spoofing)',
    skip_homograph: 'imitates “{detail}” with other letters (homograph)',
    skip_excluded: 'left out by the exclusion “{detail}”',
    addr_loopback: 'loopback',
    addr_private: 'private network',
    addr_link_local: 'link-local',
    addr_unspecified: 'unspecified',
    addr_reserved: 'reserved or multicast',
    addr_documentation: 'reserved for documentation',
    addr_shared: 'shared by a carrier',
    addr_benchmarking: 'reserved for benchmarking',
    onion_not_v3: 'not a v3 address; v2 addresses are no longer served',
    onion_bad_checksum: 'wrong checksum',
    agent_review_risk: 'Preparation risk',
    agent_review_fingerprint: 'Contract fingerprint',
    agent_review_fingerprint_stale: 'The tool’s contract changed since the request was prepared: this request is void.',
    agent_review_requested_by: 'Requested by',
    agent_review_created: 'Prepared',
    agent_review_campaign: 'Campaign',
    agent_review_synthetic: 'synthetic, no network',
    agent_review_note: 'Reason',
    agent_grant_urls: 'Addresses to fetch (one per line, at most 32)',
    agent_grant_urls_help: 'REAL workspace: only these addresses are requested, over Tor, each inside the allowed hosts.',
    agent_grant_urls_missing: 'List at least one address to fetch.',
    agent_grant_urls_too_many: 'At most {n} addresses.',
    agent_resume_after_campaign: 'The campaign has not ended: resuming the turn is offered when it does.',
    agent_revoke: 'Revoke the grant',
    agent_revoking: 'Revoking the grant…',
    agent_revoked: 'Grant revoked: its campaign is stopped, nothing more will be fetched.',
    fetch_heading: 'Fetched over Tor',
    fetch_url: 'Address asked',
    fetch_final_url: 'Final address',
    fetch_redirects: 'Redirects',
    fetch_http: 'HTTP status',
    fetch_content_type: 'Content-Type received',
    fetch_started: 'Started',
    fetch_elapsed: 'Duration',
    fetch_elapsed_value: '{ms} ms',
    fetch_isolation: 'Tor isolation',
    fetch_route: 'Path through Tor',
    route_exit: 'through a Tor exit relay',
    route_onion_service: 'onion service: end to end inside Tor, no exit relay',
    fetch_campaign: 'Campaign',
    fetch_grant: 'Grant',
    fetch_headers: 'Headers kept',
    camp_PENDING: 'waiting for admission',
    camp_CONFIRMING: 'waiting for your confirmation',
    camp_ADMITTED: 'admitted',
    camp_RUNNING: 'running',
    camp_COMPLETED: 'completed',
    camp_FAILED: 'failed',
    camp_STOPPED: 'stopped',
    camp_progress: '{done} fetched, {failed} failed, {rest} left of {total} · {bytes} · {elapsed}',
    camp_progress_label: 'Campaign progress: {done} fetched, {failed} failed, {rest} left',
    camp_elapsed: '{s} s elapsed',
    camp_not_started: 'not started yet',
    camp_col_pos: '#',
    camp_col_url: 'Address (reason)',
    camp_col_status: 'Status',
    camp_open_evidence: 'open',
    camp_col_http: 'HTTP',
    camp_col_bytes: 'Bytes',
    camp_col_evidence: 'Evidence',
    item_PLANNED: 'planned',
    item_FETCHED: 'fetched',
    item_FAILED: 'failed',
    item_REFUSED: 'refused',
    item_UNAVAILABLE: 'unavailable',
    item_STOPPED: 'stopped',
    egress_loading: 'Tor: asking…',
    egress_ready: 'Tor: ready',
    egress_bootstrap: 'Tor: bootstrapping {p} % — {phase}',
    egress_error_reported: 'error reported (details on hover)',
    egress_arti_error: 'Last error of the Tor client (arti): {error}',
    egress_unavailable: 'Tor: unavailable — {reason}',
    egress_poll_error: 'Tor: state unknown — {message}',
    egress_title: 'This workstation’s only network goes through Tor (the egress process). In flight: {n} · fetched {fetched}, refused {refused}, unavailable {unavailable}, failed {failed}, stopped {stopped}.',
    agent_grant_hosts: 'Allowed hosts (one per line)',
    agent_grant_requests: 'Max. requests',
    agent_grant_bytes: 'Max. bytes',
    agent_grant_minutes: 'Expiry (minutes)',
    agent_grant: 'Grant',
    agent_grant_hosts_missing: 'Give at least one host.',
    agent_grant_hosts_too_many: 'At most {n} hosts.',
    agent_grant_number: '“{field}” must be a positive whole number.',
    agent_granting: 'Saving the grant…',
    agent_granted: 'Granted ({grant}), campaign {campaign}. Resume the turn to get the summary.',
    agent_granted_confirm: 'Grant recorded ({grant}). Confirm it outside the server to start campaign {campaign}.',
    confirm_title: 'Confirmation needed outside the server',
    flog_title: 'Egress log: {n} request(s), kept by the egress process, out of this server’s reach',
    flog_col_time: 'Time',
    flog_col_url: 'Address (reason)',
    flog_unavailable: 'Egress log unavailable: {detail}',
    confirm_why: 'Nothing leaves the machine until you confirm these addresses on the confirmation page, served by the egress process that this server can neither draw nor click, or on the terminal.',
    confirm_open: 'Open the confirmation page',
    confirm_terminal: 'Or, on the terminal:',
    confirm_unavailable: 'The egress process does not answer: confirmation is not possible for now.',
    agent_refuse_reason: 'Reason for refusing',
    agent_refuse: 'Refuse',
    agent_refuse_missing: 'Give a reason for refusing.',
    agent_refusing: 'Saving the refusal…',
    agent_refused: 'Research refused. Resume the turn to close it.',
    agent_decided: 'Decision recorded ({status}): resume the turn.',
    agent_resume: 'Resume',
    agent_resuming: 'Resuming the turn…',
    agent_resumed: 'Turn resumed: {status}.',
    agent_plan: 'Plan',
    agent_plan_progress: '{done} / {total} steps done',
    agent_results: 'Tool results',
    agent_activity: 'Activity',
    agent_card_open: 'Show result',
    agent_card_close: 'Hide',
    agent_card_diagnostic: 'Diagnostic',
    agent_result_loading: 'Loading the result…',
    agent_result_refs: 'Objects',
    agent_result_provenance: 'Provenance',
    agent_result_none: 'none',
    agent_result_untrusted: 'untrusted data, shown as text',
    agent_result_trusted: 'Labfy data',
    agent_result_truncated: '… (preview truncated)',
    rtd_tool_result: '{tool}: {status}',
    rtd_turn_end: '{status}: {detail}',
    sbx_program: 'Program',
    sbx_end: 'End',
    sbx_end_exited: 'exited, code {code}',
    sbx_end_signalled: 'ended by signal {signal}',
    sbx_end_stopped: 'stopped by the governor: {reason}',
    sbx_usage: 'Resources',
    sbx_usage_line: '{ms} ms · peak memory {mem} · CPU {cpu} ms',
    sbx_inputs: 'Inputs',
    sbx_stdout: 'Standard output',
    sbx_stderr: 'Standard error',
    sbx_stream_cut: '… ({bytes} written in all; only the beginning is kept)',
    sbx_empty: '(empty)',
    sbx_files: 'Files left in /work (not stored)',
    sbx_files_more: '{n} more file(s) not listed',
    sbx_no_text: '(binary or too large: only the digest is kept)',
    agent_missed: 'Older events were evicted from the agent’s log.',
    agent_poll_stopped: 'Agent tracking stopped: {message}',
    agent_poll_retry: 'Resume tracking',
    agent_demo: 'Deterministic demo agent',
    agent_mode_detail: '{label}: {detail}',
    agent_mode_closed: '{label} — stopped',
    agent_cancel: 'Cancel',
    agent_cancelling: 'Cancelling the turn…',
    agent_cancelled: 'Turn cancelled.',
    agent_counters: 'Model rounds: {rounds} · tool calls: {calls} · repairs: {repairs}',
    agent_turn_lost: 'The server no longer tracks this turn (evicted, or the server restarted).',
    agent_resume_queued: 'Resume requested: {status}.',
    agent_resume_refused: 'Resume refused: {message}',
    agent_end_CANCELLED: 'Turn cancelled: {message}',
    agent_end_FAILED: 'The turn failed: {message}',
    agent_end_MODEL_UNAVAILABLE: 'The local model did not answer: {message}',
    agent_end_MODEL_PROTOCOL_ERROR: 'The model broke the answer format: {message}',
    agent_end_BUDGET_EXHAUSTED: 'The turn ran out of budget: {message}',
    turn_QUEUED: 'queued',
    turn_RUNNING: 'running',
    turn_AUTHORIZATION_REQUIRED: 'authorization required',
    turn_COMPLETED: 'completed',
    turn_FAILED: 'failed',
    turn_CANCELLED: 'cancelled',
    turn_MODEL_UNAVAILABLE: 'model unavailable',
    turn_MODEL_PROTOCOL_ERROR: 'model protocol error',
    turn_BUDGET_EXHAUSTED: 'budget exhausted',
    rs_COMPLETED: 'completed',
    rs_FAILED: 'failed',
    rs_DENIED: 'denied',
    rs_AUTHORIZATION_REQUIRED: 'authorization required',
    rs_UNAVAILABLE: 'unavailable',
    rs_CANCELLED: 'cancelled',
    req_PENDING: 'waiting for a decision',
    req_GRANTED: 'granted',
    req_REFUSED: 'refused',
    req_VOID: 'void (contract changed)',
    'ev_agent.turn.started': 'Turn started',
    'ev_agent.plan.updated': 'Plan updated',
    'ev_agent.tool.requested': 'Tool requested',
    'ev_agent.tool.started': 'Tool started',
    'ev_agent.tool.completed': 'Tool result',
    'ev_agent.authorization.required': 'Authorization required',
    'ev_agent.turn.completed': 'Turn completed',
    'ev_agent.error': 'Error',
    'evrt_turn.queued': 'Turn queued',
    'evrt_turn.running': 'Turn picked up',
    'evrt_model.answer': 'Model answer',
    'evrt_model.repair': 'Repair asked of the model',
    'evrt_model.context': 'Model context full: concluding',
    'evrt_tool.call': 'Tool call',
    'evrt_tool.result': 'Tool result',
    'evrt_turn.paused': 'Turn paused',
    'evrt_turn.resume_refused': 'Resume refused',
    'evrt_turn.completed': 'Turn completed',
    'evrt_turn.failed': 'Turn stopped',
    'evrt_turn.cancelled': 'Turn cancelled',
    // Resources panel (SPEC Q5)
    res_title: 'Resources',
    res_loading: 'Asking the governor…',
    res_unavailable: 'Governor unavailable: {detail}',
    res_unavailable_short: 'unavailable',
    res_no_sample: 'The governor has no sample yet.',
    res_sample: 'Sample of {time} · period {period} s · {n} point(s) in memory',
    res_sample_old: 'Old sample ({age} s): has the governor stopped sampling?',
    res_poll_stopped: 'Resource tracking stopped: {message}',
    res_poll_retry: 'Resume tracking',
    res_chart_label: 'Resource use over the last {n} minutes, as a percentage of the total',
    res_now: 'now',
    res_ago_min: '−{n} min',
    res_legend_reserved: 'dashes: usage + what reservations may still take (reserved − measured peak, all of it while nothing is measured)',
    res_legend_stale: 'grey lines: no fresh data',
    res_series_ram: 'RAM',
    res_series_swap: 'Swap',
    res_series_vram: 'VRAM',
    res_series_gtt: 'GTT',
    res_series_scratch: 'Scratch (Labfy)',
    res_amount_ram: 'RAM',
    res_amount_swap: 'Swap',
    res_amount_vram: 'VRAM',
    res_amount_scratch: 'Scratch',
    res_figures: 'Current figures',
    res_col_resource: 'Resource',
    res_col_used: 'Used',
    res_col_total: 'Total',
    res_col_share: 'Share',
    res_col_reserved: 'Reserved',
    res_col_admissible: 'Admissible',
    res_scratch_free: '{path} · free: {free}',
    res_no_swap: 'no swap configured',
    res_psi: 'Memory pressure (PSI, avg 10 s): some {some} · full {full}',
    res_psi_none: 'Memory pressure (PSI): not reported by the kernel.',
    res_gpus: 'GPUs',
    res_no_gpu: 'No GPU found.',
    res_col_gpu: 'GPU',
    res_col_vram: 'VRAM',
    res_col_gtt: 'GTT',
    res_col_busy: 'Busy',
    res_col_temp: 'Temp.',
    res_col_power: 'Power',
    res_col_source: 'Source',
    res_uma: 'APU (shared memory)',
    res_facts: 'Governor facts',
    res_no_facts: 'No facts.',
    res_pressure: 'Admissions paused: {reason}',
    res_no_confinement: 'No confinement: the governor cannot make cgroups here, so it refuses every local model start and every sandbox run. The governor’s reason:',
    res_no_confinement_hint: 'The operator will find what to do in the operations guide, section “cgroups”.',
    res_reservations: 'Reservations',
    res_no_reservations: 'No reservations.',
    res_col_owner: 'Holder',
    res_col_kind: 'Kind',
    res_col_peak: 'Measured peak',
    res_col_priority: 'Priority',
    res_col_lease: 'Lease',
    res_lease_process: 'while the process lives',
    res_kind_model: 'model',
    res_kind_campaign: 'campaign',
    res_kind_sandbox: 'sandbox run',
    res_model: 'Local model',
    res_model_state: 'State',
    res_model_endpoint: 'Endpoint',
    res_model_estimate: 'Reserved estimate',
    res_model_estimate_parts: 'weights {weights} · KV cache {kv} · overhead {overhead} · context {ctx}',
    res_model_peak: 'Measured memory peak',
    res_model_restarts: 'Restarts',
    res_model_detail: 'Last event',
    res_log: 'Admission log',
    res_no_decisions: 'No decisions.',
    res_col_time: 'Time',
    res_col_decision: 'Decision',
    res_col_asked: 'Asked',
    res_col_reason: 'Reason',
    res_col_blocked: 'Blocked by',
    res_outcome_admitted: 'admitted',
    res_outcome_refused: 'refused',
    res_outcome_released: 'released',
    res_outcome_lapsed: 'lease lapsed',
    res_outcome_stopped: 'stopped',
    res_none: '—',
  },
};

// ---------------------------------------------------------------------------
// Language

function loadLang() {
  try {
    const stored = window.localStorage.getItem(LANG_KEY);
    if (LANGS.includes(stored)) return stored;
  } catch {
    // Storage may be disabled; French is the default.
  }
  return 'fr';
}

let lang = loadLang();

function hasLabel(key) {
  return Object.prototype.hasOwnProperty.call(I18N[lang], key);
}

function t(key, vars) {
  let s = hasLabel(key) ? I18N[lang][key] : (I18N.fr[key] ?? key);
  if (vars) {
    s = s.replace(/\{(\w+)\}/g, (m, name) =>
      Object.prototype.hasOwnProperty.call(vars, name) ? String(vars[name]) : m);
  }
  return s;
}

// Plural-aware label: `key_one` / `key_other`.
function tn(key, n, vars) {
  const form = new Intl.PluralRules(LOCALES[lang]).select(n) === 'one' ? 'one' : 'other';
  return t(`${key}_${form}`, { n: fmtNumber(n), ...vars });
}

// Label of an API enum value (kind, relation, status) or the raw value.
function enumLabel(prefix, value) {
  const raw = String(value ?? '');
  for (const key of [`${prefix}_${raw}`, `${prefix}_${raw.toLowerCase()}`]) {
    if (hasLabel(key)) return t(key);
  }
  return raw;
}

function setLang(next) {
  if (!LANGS.includes(next) || next === lang) return;
  lang = next;
  try {
    window.localStorage.setItem(LANG_KEY, lang);
  } catch {
    // Not persisted; the choice still applies to this page.
  }
  applyChrome();
  renderSearchResults();
  renderAgent();
  renderResources();
  renderEgress();
  route();
}

// ---------------------------------------------------------------------------
// Formatting

function fmtNumber(n) {
  const v = Number(n);
  return Number.isFinite(v) ? new Intl.NumberFormat(LOCALES[lang]).format(v) : String(n ?? '');
}

function fmtDate(value) {
  if (value === null || value === undefined || value === '') return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return new Intl.DateTimeFormat(LOCALES[lang], { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

// A <time> element: readable text, raw value in `datetime` and as a tooltip.
function timeEl(value) {
  const el = h('time', { text: fmtDate(value) });
  if (typeof value === 'string' && value) {
    el.setAttribute('datetime', value);
    el.title = value;
  }
  return el;
}

// ---------------------------------------------------------------------------
// DOM helpers. Text only ever goes through createTextNode / textContent.

// Bidirectional overrides, embeddings and isolates (U+202A–U+202E,
// U+2066–U+2069) in text from outside would reorder what the analyst reads:
// `facture<U+202E>fdp.exe` displays as `factureexe.pdf`, and the override
// runs on into the rest of the line (issue 19's corpus). Every string the
// UI shows goes through here and shows them as `[U+202E]`; legitimate
// right-to-left text needs none of them.
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

function shown(value) {
  return String(value).replace(BIDI_CONTROLS, (c) => `[U+${c.codePointAt(0).toString(16).toUpperCase()}]`);
}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'text') el.textContent = shown(value);
      else if (name === 'class') el.className = value;
      else if (name === 'testid') el.dataset.testid = value;
      else if (name === 'dataset') Object.assign(el.dataset, value);
      else if (name === 'hidden') el.hidden = Boolean(value);
      else if (name === 'href') el.setAttribute('href', value);
      else el.setAttribute(name, value === true ? '' : shown(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(shown(child)));
  }
  return el;
}

function clear(el) {
  el.replaceChildren();
  return el;
}

const $ = (id) => document.getElementById(id);

// Keep the `:` of object refs readable in URLs; escape everything else.
function seg(ref) {
  return encodeURIComponent(String(ref)).replace(/%3A/gi, ':');
}

function isEvidence(ref, kind) {
  return kind === 'evidence' || String(ref).startsWith('evidence:');
}

function hrefFor(ref, kind) {
  return isEvidence(ref, kind) ? `#/evidence/${seg(ref)}` : `#/node/${seg(ref)}`;
}

// The kind to show for a graph object. Graph nodes say `kind: "entity"`
// with the entity kind (person, domain…) in `subkind`; evidence nodes carry
// their MIME type in `subkind`.
function displayKind(obj) {
  if (!obj) return '';
  return obj.kind === 'entity' && obj.subkind ? obj.subkind : (obj.kind ?? '');
}

// A link to an object: its label, then its kind in a muted tag.
function objectLink(obj, testid) {
  const label = obj.label ?? obj.name ?? obj.title ?? obj.id;
  const kind = displayKind(obj);
  return h('a', {
    href: hrefFor(obj.id, obj.kind),
    class: 'obj',
    testid,
    dataset: { ref: String(obj.id), kind: String(obj.kind ?? ''), subkind: String(obj.subkind ?? '') },
  },
  h('span', { class: 'obj-label', text: label }),
  kind ? h('span', { class: `kind kind-${cssToken(kind)}`, text: enumLabel('kind', kind) }) : null);
}

// A node detail value: dates and numbers formatted, anything else as text.
function detailValue(key, value) {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'number') return fmtNumber(value);
  if (typeof value === 'object') return JSON.stringify(value);
  if (/_at$/.test(key)) return timeEl(value);
  if (key === 'sha256') return h('code', { class: 'hash', text: value });
  return String(value);
}

function cssToken(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9_-]/g, '');
}

function section(titleKey, testid, ...children) {
  return h('section', { class: 'panel', testid },
    h('h2', { text: t(titleKey) }), ...children);
}

function emptyNote(key = 'empty', testid) {
  return h('p', { class: 'muted empty', testid, text: t(key) });
}

function dl(rows, testid) {
  const list = h('dl', { class: 'meta', testid });
  for (const [label, value, rowTestid] of rows) {
    list.append(h('dt', { text: label }), h('dd', { testid: rowTestid }, value));
  }
  return list;
}

// ---------------------------------------------------------------------------
// Status line

function setStatus(text, kind = 'info') {
  const el = $('status');
  el.textContent = text || '';
  el.dataset.kind = kind;
  el.hidden = !text;
}

function clearStatus() {
  setStatus('');
}

function showError(err) {
  setStatus(errorText(err), 'error');
}

// ---------------------------------------------------------------------------
// API

class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return t('err_session');
    if (err.status === 429) return t('err_rate', { s: err.retryAfter || '?' });
    return t('err_api', { status: err.status, code: err.code, message: err.message });
  }
  if (err && err.name === 'AbortError') return t('err_timeout');
  if (err && err.name === 'TypeError') return t('err_network', { message: err.message });
  return t('err_unexpected');
}

function metaToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  const value = meta ? meta.getAttribute('content') : '';
  return value && !value.includes('{{') ? value : null;
}

// The server's rate guard on writes (SPEC T5) answers 429 with Retry-After;
// the UI's own writes wait that long and try again, a few times, so that an
// analyst's burst (notes, an import of many batches) is paced rather than
// failed. A longer wait, or a fourth 429, is reported.
const RATE_RETRIES = 3;
const RATE_MAX_WAIT_S = 10;

async function paced(send) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await send();
    } catch (err) {
      const wait = err instanceof ApiError && err.status === 429 ? Number(err.retryAfter) : NaN;
      if (!(wait > 0 && wait <= RATE_MAX_WAIT_S) || attempt >= RATE_RETRIES) throw err;
      await new Promise((ok) => setTimeout(ok, wait * 1000));
    }
  }
}

function api(path, options = {}) {
  return (options.method ?? 'GET') === 'GET' ? apiOnce(path, options) : paced(() => apiOnce(path, options));
}

async function apiOnce(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    const token = state.csrf || metaToken();
    if (token) headers['X-CSRF-Token'] = token;
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data && typeof data === 'object' && data.error ? data.error : {};
    throw new ApiError(res.status, String(e.code ?? 'http_error'),
      String(e.message ?? res.statusText ?? ''), res.headers.get('Retry-After'));
  }
  // 204 (a deletion) answers nothing, on purpose.
  if (res.status === 204) return {};
  if (data === null || typeof data !== 'object') {
    throw new ApiError(res.status, 'bad_response', t('err_unexpected'));
  }
  return data;
}

// ---------------------------------------------------------------------------
// State

const state = {
  csrf: null,
  workspaceId: null,
  isolation: null, // { isolated, detail } from the server, a kernel fact
  workspace: null,
  investigations: [],
  investigationId: null,
  bootError: null,
  booted: false,
  gen: 0, // bumped on every route; stale renders check it and stop
  leaveView: [], // what the shown view frees when another replaces it (a drawing)
  search: null, // { q, gen, loading, data, error }
  searchGen: 0,
};

// ---------------------------------------------------------------------------
// Chrome: header, labels, search box

function applyChrome() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll('[data-i18n-aria-label]')) el.setAttribute('aria-label', t(el.dataset.i18nAriaLabel));
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.setAttribute('aria-pressed', String(btn.dataset.lang === lang));
  }
  renderWorkspace();
}

function renderWorkspace() {
  const ws = state.workspace;
  $('workspace-name').textContent = ws ? String(ws.name ?? '') : '';
  const badge = $('workspace-class');
  if (ws && ws.class) {
    const cls = String(ws.class);
    badge.textContent = hasLabel(`class_${cls}`) ? t(`class_${cls}`) : cls;
    badge.className = `badge badge-${cssToken(cls)}`;
    badge.dataset.class = cls;
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  const iso = $('isolation');
  if (state.isolation && typeof state.isolation.isolated === 'boolean') {
    // SPEC T1: a protection this platform could not give is said on the
    // badge itself, not only in its tooltip.
    const missing = Array.isArray(state.isolation.missing)
      ? state.isolation.missing.filter((c) => hasLabel(`missing_${c}`))
      : [];
    const absent = missing.length ? ` — ${t('missing_protections')} ${missing.map((c) => t(`missing_${c}`)).join(', ')}` : '';
    iso.textContent = t(state.isolation.isolated ? 'isolated' : 'not_isolated') + absent;
    iso.title = String(state.isolation.detail ?? '');
    iso.className = `badge ${state.isolation.isolated ? 'badge-isolated' : 'badge-not-isolated'}${missing.length ? ' badge-missing' : ''}`;
    iso.dataset.isolated = String(state.isolation.isolated);
    iso.hidden = false;
  } else {
    iso.hidden = true;
  }
  const picker = $('investigation-picker');
  const select = $('investigation-select');
  const shown = state.investigations.filter((i) => !i.archived_at || i.id === state.investigationId);
  if (shown.length > 1) {
    clear(select);
    for (const inv of shown) {
      const opt = h('option', { value: String(inv.id), text: inv.title ?? inv.id });
      opt.selected = inv.id === state.investigationId;
      select.append(opt);
    }
    picker.hidden = false;
  } else {
    picker.hidden = true;
  }
}

function bindChrome() {
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.addEventListener('click', () => setLang(btn.dataset.lang));
  }
  $('investigation-select').addEventListener('change', (ev) => {
    state.investigationId = ev.target.value;
    state.search = null;
    renderSearchResults();
    if (location.hash === '#/' || location.hash === '') route();
    else location.hash = '#/';
  });
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    runSearch($('search-input').value);
  });
  window.addEventListener('hashchange', route);
}

// ---------------------------------------------------------------------------
// Search

async function runSearch(raw) {
  const q = raw.trim();
  const gen = ++state.searchGen;
  if (!q) {
    state.search = null;
    renderSearchResults();
    return;
  }
  if (Array.from(q).length > SEARCH_MAX_CHARS) {
    state.search = { q, loading: false, error: null, tooLong: true };
    renderSearchResults();
    return;
  }
  if (!state.investigationId) {
    state.search = { q, loading: false, error: null, noInvestigation: true };
    renderSearchResults();
    return;
  }
  state.search = { q, loading: true, data: null, error: null };
  renderSearchResults();
  try {
    const data = await api(`/api/v1/investigations/${seg(state.investigationId)}/search?q=${encodeURIComponent(q)}&limit=${SEARCH_LIMIT}`);
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data, error: null };
  } catch (err) {
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data: null, error: err };
    showError(err);
  }
  renderSearchResults();
}

// Split a snippet on U+E000 (match start) / U+E001 (match end) into text
// nodes and <mark> elements. Unbalanced markers are tolerated.
function snippetNodes(snippet) {
  const out = [];
  let buf = '';
  let inMark = false;
  const flush = () => {
    if (!buf) return;
    out.push(inMark ? h('mark', { text: buf }) : document.createTextNode(shown(buf)));
    buf = '';
  };
  for (const ch of String(snippet ?? '')) {
    if (ch === MARK_START) {
      flush();
      inMark = true;
    } else if (ch === MARK_END) {
      flush();
      inMark = false;
    } else {
      buf += ch;
    }
  }
  flush();
  return out;
}

function renderSearchResults() {
  const summary = $('search-summary');
  const list = clear($('search-results'));
  const s = state.search;
  summary.dataset.state = 'idle';
  if (!s) {
    summary.textContent = t('search_hint');
    return;
  }
  if (s.tooLong) {
    summary.textContent = t('search_too_long', { n: SEARCH_MAX_CHARS });
    summary.dataset.state = 'error';
    return;
  }
  if (s.noInvestigation) {
    summary.textContent = t('search_no_investigation');
    summary.dataset.state = 'error';
    return;
  }
  if (s.loading) {
    summary.textContent = t('search_loading', { q: s.q });
    summary.dataset.state = 'loading';
    return;
  }
  if (s.error) {
    summary.textContent = errorText(s.error);
    summary.dataset.state = 'error';
    return;
  }
  const hits = Array.isArray(s.data.hits) ? s.data.hits : [];
  summary.dataset.state = 'done';
  summary.textContent = hits.length ? tn('search_hits', hits.length, { q: s.q }) : t('search_none', { q: s.q });
  for (const hit of hits) {
    const metaParts = [hit.source, hit.mime].filter((x) => x !== null && x !== undefined && x !== '');
    list.append(h('li', null,
      h('a', { href: hrefFor(hit.id, 'evidence'), class: 'hit', testid: 'search-hit', dataset: { ref: String(hit.id) } },
        h('span', { class: 'hit-title', testid: 'search-hit-title', text: hit.title ?? hit.id }),
        h('span', { class: 'hit-meta' },
          h('span', { class: 'hit-source', text: metaParts.join(' · ') }),
          hit.collected_at ? timeEl(hit.collected_at) : null),
        h('span', { class: 'hit-snippet', testid: 'search-hit-snippet' }, snippetNodes(hit.snippet)))));
  }
  if (s.data.truncated) {
    list.append(h('li', { class: 'muted small', text: t('search_truncated') }));
  }
  if (Number.isInteger(s.data.ranked_among)) {
    list.append(h('li', { class: 'muted small', testid: 'search-ranked-among',
      text: t('search_ranked_among', { n: fmtNumber(s.data.ranked_among) }) }));
  }
}

// ---------------------------------------------------------------------------
// Routing

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const slash = raw.indexOf('/');
  const name = slash < 0 ? raw : raw.slice(0, slash);
  let arg = slash < 0 ? '' : raw.slice(slash + 1);
  try {
    arg = decodeURIComponent(arg);
  } catch {
    // Keep the raw text; the API will answer 400/404 for a bad ref.
  }
  return { name, arg };
}

function beginView(className, testid) {
  const gen = ++state.gen;
  for (const free of state.leaveView.splice(0)) free();
  clearStatus();
  // What the last action said (a note saved, an entity merged) shows once
  // the view it led to starts.
  flushPendingStatus();
  const view = clear($('view'));
  view.className = `view ${className}`;
  view.dataset.view = testid;
  view.dataset.state = 'loading';
  view.append(h('p', { class: 'muted loading', testid: 'loading', text: t('loading') }));
  return { gen, view, live: () => gen === state.gen };
}

function finishView(ctx, ...children) {
  if (!ctx.live()) return false;
  clear(ctx.view);
  append(ctx.view, children);
  ctx.view.dataset.state = 'ready';
  return true;
}

function failView(ctx, err) {
  if (!ctx.live()) return;
  clear(ctx.view);
  ctx.view.dataset.state = 'error';
  ctx.view.append(h('div', { class: 'error-box', testid: 'view-error' },
    h('p', { text: t('view_failed') }),
    h('a', { href: '#/', text: t('back_overview') })));
  showError(err);
}

function route() {
  if (!state.booted) return;
  const { name, arg } = parseHash();
  switch (name) {
    case '':
    case 'overview':
      return renderOverview();
    case 'evidence':
      return arg ? renderEvidence(arg) : renderOverview();
    case 'node':
      return arg ? renderNode(arg) : renderOverview();
    case 'provenance':
      return arg ? renderProvenance(arg) : renderOverview();
    case 'cases':
      return renderCases();
    case 'list':
      return renderList();
    default:
      renderOverview();
      setStatus(t('unknown_route'), 'info');
      return undefined;
  }
}

// ---------------------------------------------------------------------------
// Lists (SPEC U2): every count opens its list — `#/list/{what}?kind=&sort=&
// order=&prefix=` — sorted by a column header, filtered by kind or by the
// start of a title or name, paginated by key (`after`: the last item shown;
// earlier pages are remembered while the view lives).

const LISTS = ['evidence', 'entities', 'relations'];
const LIST_PAGE = 50;
const ENTITY_KINDS = ['person', 'organisation', 'location', 'domain', 'email', 'phone', 'url', 'ipv4', 'ipv6',
  'iban', 'btc_address', 'eth_address', 'onion', 'file_hash'];
// Columns: [label key, sort name or null, cell, cell class].
const LIST_COLUMNS = {
  evidence: [
    ['list_col_title', 'title', (e) => h('a', { href: hrefFor(e.id, 'evidence'), class: 'obj', testid: 'list-object', text: e.title })],
    ['list_col_mime', null, (e) => e.mime, 'nowrap'],
    ['list_col_size', null, (e) => fmtBytes(e.byte_len), 'nowrap num'],
    ['list_col_collected', 'collected', (e) => timeEl(e.collected_at), 'nowrap'],
  ],
  entities: [
    ['list_col_name', 'name', (e) => objectLink({ id: e.id, kind: 'entity', subkind: e.kind, label: e.name }, 'list-object')],
    ['list_col_pieces', 'mentions', (e) => fmtNumber(e.mention_count), 'nowrap num'],
  ],
  relations: [
    ['list_col_src', null, (r) => objectLink(r.src, 'list-object')],
    ['list_col_relation', null, (r) => enumLabel('rel', r.kind)],
    ['list_col_dst', null, (r) => objectLink(r.dst, 'list-object')],
    ['list_col_confidence', null, (r) => fmtNumber(r.confidence), 'nowrap num'],
    ['list_col_producer', null, (r) => enumLabel('producer', r.producer ?? 'specimen')],
    ['list_col_created', 'created', (r) => timeEl(r.created_at), 'nowrap'],
  ],
};
// Sorts whose natural order is newest or most first.
const LIST_DESC_FIRST = new Set(['collected', 'mentions', 'created']);

function listHref(what, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const tail = q.toString();
  return `#/list/${what}${tail ? `?${tail}` : ''}`;
}

function listParams() {
  const raw = location.hash.replace(/^#\/?list\/?/, '');
  const at = raw.indexOf('?');
  const what = at < 0 ? raw : raw.slice(0, at);
  const q = new URLSearchParams(at < 0 ? '' : raw.slice(at + 1));
  return { what, kind: q.get('kind') || '', sort: q.get('sort') || '', order: q.get('order') || '', prefix: q.get('prefix') || '' };
}

async function renderList() {
  const p = listParams();
  if (!LISTS.includes(p.what)) {
    renderOverview();
    setStatus(t('unknown_route'), 'info');
    return;
  }
  const ctx = beginView('view-list', 'list');
  const inv = state.investigationId;
  const kindLabel = p.kind ? enumLabel(p.what === 'relations' ? 'rel' : 'kind', p.kind) : '';
  const title = p.kind ? t(`list_title_${p.what}_kind`, { kind: kindLabel }) : t(`list_title_${p.what}`);
  setTitle(title);
  const pages = [null]; // `after` of each page seen; the last is the one shown
  const tbody = h('tbody', { testid: 'list-rows' });
  const summary = h('p', { class: 'muted small', testid: 'list-summary', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', class: 'secondary', testid: 'list-prev', text: t('list_prev'), disabled: true });
  const next = h('button', { type: 'button', class: 'secondary', testid: 'list-next', text: t('list_next'), disabled: true });
  const error = h('p', { class: 'error-box', testid: 'list-error', role: 'alert', hidden: true });
  let nextCursor = null;
  let sortShown = p.sort;
  let orderShown = p.order;

  const columns = LIST_COLUMNS[p.what];
  const go = (change) => { location.hash = listHref(p.what, { kind: p.kind, sort: p.sort, order: p.order, prefix: p.prefix, ...change }); };
  const headRow = h('tr', null);
  const renderHead = () => {
    clear(headRow);
    for (const [key, sort] of columns) {
      if (!sort) {
        headRow.append(h('th', { scope: 'col', text: t(key) }));
        continue;
      }
      const active = sort === sortShown;
      const desc = orderShown === 'desc';
      const th = h('th', { scope: 'col', 'aria-sort': active ? (desc ? 'descending' : 'ascending') : 'none' });
      const button = h('button', { type: 'button', class: 'sort', testid: `list-sort-${sort}`, dataset: { active: String(active) } },
        t(key), active ? h('span', { 'aria-hidden': 'true', text: desc ? ' ↓' : ' ↑' }) : null);
      button.addEventListener('click', () => {
        // The same column again turns the order around; a new one starts in
        // its natural order. Only the text column keeps a text filter.
        const order = active ? (desc ? 'asc' : 'desc') : (LIST_DESC_FIRST.has(sort) ? 'desc' : 'asc');
        const textSort = sort === 'title' || sort === 'name';
        go({ sort, order, prefix: textSort ? p.prefix : '' });
      });
      th.append(button);
      headRow.append(th);
    }
  };

  const load = async () => {
    const after = pages[pages.length - 1];
    const q = new URLSearchParams({ limit: String(LIST_PAGE) });
    for (const k of ['kind', 'sort', 'order', 'prefix']) if (p[k]) q.set(k, p[k]);
    if (after) q.set('after', after);
    prev.disabled = true;
    next.disabled = true;
    error.hidden = true;
    ctx.view.dataset.state = 'loading';
    try {
      const page = await api(`/api/v1/investigations/${seg(inv)}/lists/${p.what}?${q}`);
      if (!ctx.live()) return;
      sortShown = page.sort;
      orderShown = page.order;
      renderHead();
      clear(tbody);
      const items = Array.isArray(page.items) ? page.items : [];
      for (const item of items) {
        tbody.append(h('tr', { testid: 'list-row', dataset: { ref: String(item.id) } },
          columns.map(([, , cell, cls]) => h('td', { class: cls }, cell(item)))));
      }
      if (items.length === 0) {
        tbody.append(h('tr', null, h('td', { colspan: String(columns.length), class: 'muted empty', testid: 'list-empty',
          text: p.prefix ? t('list_empty_prefix', { prefix: p.prefix }) : t('list_empty') })));
      }
      nextCursor = page.next ?? null;
      const n = pages.length;
      const from = (n - 1) * LIST_PAGE + 1;
      summary.textContent = items.length === 0 ? '' : t('list_range', {
        from: fmtNumber(from), to: fmtNumber(from + items.length - 1), page: fmtNumber(n),
      }) + (nextCursor ? '' : ` · ${t('list_end')}`);
      summary.dataset.shown = String(items.length);
      prev.disabled = n <= 1;
      next.disabled = !nextCursor;
      ctx.view.dataset.state = 'ready';
    } catch (err) {
      if (!ctx.live()) return;
      error.textContent = errorText(err);
      error.hidden = false;
      ctx.view.dataset.state = 'ready';
      prev.disabled = pages.length <= 1;
      showError(err);
    }
  };
  next.addEventListener('click', () => {
    if (!nextCursor) return;
    pages.push(nextCursor);
    load();
  });
  prev.addEventListener('click', () => {
    if (pages.length <= 1) return;
    pages.pop();
    load();
  });

  // Filters: the kind (entities, relations), the start of a title or name.
  const controls = h('form', { class: 'list-controls', testid: 'list-controls', autocomplete: 'off', novalidate: true });
  if (p.what !== 'evidence') {
    const kinds = p.what === 'entities' ? ENTITY_KINDS : RELATION_KINDS;
    const select = h('select', { id: 'list-kind', testid: 'list-kind' },
      h('option', { value: '', text: t('list_kind_all') }),
      kinds.map((k) => h('option', { value: k, text: enumLabel(p.what === 'relations' ? 'rel' : 'kind', k) })));
    select.value = p.kind;
    select.addEventListener('change', () => go({ kind: select.value }));
    controls.append(h('label', { for: 'list-kind', text: t('list_kind') }), select);
  }
  if (p.what !== 'relations') {
    const input = h('input', { id: 'list-prefix', testid: 'list-prefix', type: 'search', maxlength: '200', spellcheck: 'false',
      placeholder: t(p.what === 'evidence' ? 'list_prefix_title' : 'list_prefix_name') });
    input.value = p.prefix;
    controls.append(h('label', { for: 'list-prefix', text: t('list_prefix') }), input,
      h('button', { type: 'submit', testid: 'list-filter', text: t('list_filter') }));
    controls.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const prefix = input.value.trim();
      // A text filter lists in title or name order (the server's rule).
      go({ prefix, sort: prefix ? '' : p.sort, order: prefix ? '' : p.order });
    });
  }

  const shown = finishView(ctx,
    h('article', { class: 'list', testid: 'list-view', dataset: { list: p.what, kind: p.kind } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('list_eyebrow') }),
        h('h1', { testid: 'list-title', text: title })),
      h('section', { class: 'panel' },
        controls,
        h('div', { class: 'table-wrap' },
          h('table', { class: 'list-table', testid: 'list-table' }, h('thead', null, headRow), tbody)),
        error,
        h('div', { class: 'list-foot' }, summary, h('div', { class: 'list-pager' }, prev, next)))));
  if (!shown) return;
  renderHead();
  await load();
}

// ---------------------------------------------------------------------------
// Cases (SPEC C1): the investigations of the served workspace — created,
// renamed, archived, brought back, opened — the workspace renamed, a new
// REAL workspace created, another one opened, archived or brought back.

async function reloadInvestigations() {
  const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
  state.investigations = investigations;
  renderWorkspace();
}

function openInvestigation(id) {
  state.investigationId = id;
  state.search = null;
  renderSearchResults();
  renderWorkspace();
  location.hash = '#/';
}

function formSay(status) {
  return (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
}

// One workspace of the data directory: the open one marked; another one
// opened (the supervisor restarts the server on it), archived or brought back.
function workspaceRow(ws, refresh) {
  const name = String(ws.name ?? ws.id);
  const current = ws.id === state.workspaceId;
  const archived = Boolean(ws.archived_at);
  const ready = String(ws.status ?? '') === 'READY';
  const cls = String(ws.class ?? '');
  const actions = h('div', { class: 'form-actions case-actions' });
  if (!current && ready && !archived) {
    const open = h('button', { type: 'button', testid: 'ws-open', text: t('cases_ws_open') });
    open.addEventListener('click', async () => {
      open.disabled = true;
      try {
        await api(`/api/v1/workspaces/${seg(ws.id)}/open`, { method: 'POST' });
        await waitForWorkspace(ws.id, name);
      } catch (err) {
        showError(err);
        open.disabled = false;
      }
    });
    actions.append(open);
  }
  if (!current) {
    const archive = h('button', { type: 'button', class: 'secondary', testid: archived ? 'ws-unarchive' : 'ws-archive', text: t(archived ? 'cases_unarchive' : 'cases_archive') });
    archive.addEventListener('click', async () => {
      archive.disabled = true;
      try {
        await api(`/api/v1/workspaces/${seg(ws.id)}/archive`, { method: 'POST', body: { archived: !archived } });
        setStatus(t(archived ? 'cases_ws_unarchived_done' : 'cases_ws_archived_done', { name }), 'ok');
        await refresh();
      } catch (err) {
        showError(err);
        archive.disabled = false;
      }
    });
    actions.append(archive);
  }
  return h('li', { class: 'case', testid: 'ws-row', dataset: { ref: String(ws.id), current: String(current) } },
    h('div', { class: 'case-head' },
      h('strong', { class: 'case-title', testid: 'ws-name', text: name }),
      h('span', { class: `pill ${cls === 'REAL' ? 'status-running' : 'status-queued'}`, text: hasLabel(`class_${cls}`) ? t(`class_${cls}`) : cls }),
      current ? h('span', { class: 'pill status-succeeded', testid: 'ws-current', text: t('cases_ws_current') }) : null,
      archived ? h('span', { class: 'pill status-queued', testid: 'ws-archived', text: t('cases_ws_archived') }) : null,
      ready ? null : h('span', { class: 'pill status-queued', text: t('cases_ws_generating') })),
    h('p', { class: 'muted small' }, tn('cases_ws_investigations', Number(ws.investigation_count ?? 0)), ' · ', t('created_label'), ' ', timeEl(ws.created_at)),
    actions.childElementCount ? actions : null);
}

// After `POST …/open` (SPEC C1): the supervisor stops this server and starts
// one on the chosen workspace on the same port (the listening socket is the
// supervisor's, so requests wait rather than fail); the session cookie is
// the supervisor's and stays valid. The page waits for the new server to
// answer for that workspace, then reloads on it.
async function waitForWorkspace(id, name) {
  const message = h('p', { text: t('switch_wait') });
  const box = h('div', { class: 'switching', role: 'status', 'aria-live': 'polite', testid: 'ws-switching' },
    h('div', { class: 'switching-card' }, h('h2', { text: t('switch_heading', { name }) }), message));
  document.body.append(box);
  const deadline = Date.now() + WORKSPACE_SWITCH_TIMEOUT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    try {
      const session = await api('/api/v1/session');
      if (session.workspace_id === id) {
        state.investigationId = null;
        location.hash = '#/';
        location.reload();
        return;
      }
    } catch {
      // The old server stopping, the new one starting: ask again.
    }
  }
  message.textContent = t('switch_failed', { name });
  const reload = h('button', { type: 'button', testid: 'ws-switch-reload', text: t('switch_reload') });
  reload.addEventListener('click', () => location.reload());
  box.firstChild.append(h('div', { class: 'form-actions' }, reload));
}

function caseRow(inv, refresh) {
  const archived = Boolean(inv.archived_at);
  const title = String(inv.title ?? inv.id);
  const rename = h('button', { type: 'button', class: 'secondary', testid: 'case-rename', text: t('cases_rename') });
  const archive = h('button', { type: 'button', class: 'secondary', testid: archived ? 'case-unarchive' : 'case-archive', text: t(archived ? 'cases_unarchive' : 'cases_archive') });
  const open = h('button', { type: 'button', testid: 'case-open', text: t('cases_open') });
  const row = h('li', { class: 'case', testid: 'case', dataset: { ref: String(inv.id), archived: String(archived) } },
    h('div', { class: 'case-head' },
      h('strong', { class: 'case-title', testid: 'case-title', text: title }),
      inv.id === state.investigationId ? h('span', { class: 'pill status-succeeded', text: t('cases_current') }) : null,
      archived ? h('span', { class: 'pill status-queued', testid: 'case-archived', text: t('cases_archived') }) : null),
    inv.summary ? h('p', { class: 'muted small', text: String(inv.summary) }) : null,
    h('p', { class: 'muted small' }, tn('cases_items', Number(inv.evidence_count ?? 0)), ' · ', t('created_label'), ' ', timeEl(inv.created_at)),
    h('div', { class: 'form-actions case-actions' }, open, rename, archive));
  open.addEventListener('click', () => openInvestigation(inv.id));
  archive.addEventListener('click', async () => {
    archive.disabled = true;
    try {
      await api(`/api/v1/investigations/${seg(inv.id)}/archive`, { method: 'POST', body: { archived: !archived } });
      setStatus(t(archived ? 'cases_unarchived_done' : 'cases_archived_done', { title }), 'ok');
      await refresh();
    } catch (err) {
      showError(err);
      archive.disabled = false;
    }
  });
  rename.addEventListener('click', () => {
    const input = h('input', { type: 'text', value: title, testid: 'case-rename-input', maxlength: '200', 'aria-label': t('cases_title') });
    const save = h('button', { type: 'button', testid: 'case-rename-save', text: t('cases_save') });
    const cancel = h('button', { type: 'button', class: 'secondary', text: t('cases_cancel') });
    const form = h('div', { class: 'case-rename' }, input, h('div', { class: 'form-actions case-actions' }, cancel, save));
    rename.disabled = true;
    row.append(form);
    input.focus();
    cancel.addEventListener('click', () => {
      form.remove();
      rename.disabled = false;
    });
    save.addEventListener('click', async () => {
      const next = input.value.trim();
      if (!next) {
        setStatus(t('cases_missing_title'), 'error');
        return;
      }
      save.disabled = true;
      try {
        await api(`/api/v1/investigations/${seg(inv.id)}/update`, { method: 'POST', body: { title: next } });
        setStatus(t('cases_renamed', { title: next }), 'ok');
        await refresh();
      } catch (err) {
        showError(err);
        save.disabled = false;
      }
    });
  });
  return row;
}

async function renderCases() {
  const ctx = beginView('view-cases', 'cases');
  setTitle(t('nav_cases'));
  if (state.bootError || !state.workspaceId) {
    failView(ctx, state.bootError ?? new ApiError(404, 'no_workspace', t('no_workspace'), null));
    return;
  }
  const list = h('ol', { class: 'rows cases', testid: 'cases' });
  const refresh = async () => {
    await reloadInvestigations();
    if (!ctx.live()) return;
    clear(list);
    // In use first, archived after, each oldest first.
    const sorted = [...state.investigations].sort((a, b) => Number(Boolean(a.archived_at)) - Number(Boolean(b.archived_at)));
    list.append(...sorted.map((i) => caseRow(i, refresh)));
  };
  try {
    await refresh();
  } catch (err) {
    failView(ctx, err);
    return;
  }

  // A new investigation.
  const title = h('input', { id: 'case-new-title', type: 'text', testid: 'case-new-title', maxlength: '200', autocomplete: 'off', required: true });
  const summary = h('textarea', { id: 'case-new-summary', rows: '2', testid: 'case-new-summary', maxlength: '2000' });
  const create = h('button', { type: 'submit', testid: 'case-create', text: t('cases_create') });
  const createStatus = h('p', { class: 'form-status', role: 'status', hidden: true });
  const createForm = h('form', { class: 'note-form', testid: 'case-new', novalidate: true },
    h('label', { for: 'case-new-title', text: t('cases_title') }), title,
    h('label', { for: 'case-new-summary', text: t('cases_summary') }), summary,
    h('div', { class: 'form-actions' }, create), createStatus);
  createForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const say = formSay(createStatus);
    if (!title.value.trim()) {
      say(t('cases_missing_title'), 'error');
      return;
    }
    create.disabled = true;
    try {
      const inv = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`, {
        method: 'POST', body: { title: title.value.trim(), summary: summary.value.trim() },
      });
      await reloadInvestigations();
      setStatusAfterRoute(t('cases_created', { title: inv.title }), 'ok');
      openInvestigation(inv.id);
    } catch (err) {
      say(errorText(err), 'error');
      create.disabled = false;
    }
  });

  // Every workspace of the data directory.
  const wsList = h('ol', { class: 'rows cases', testid: 'ws-list' });
  const refreshWorkspaces = async () => {
    const { workspaces = [] } = await api('/api/v1/workspaces');
    if (!ctx.live()) return;
    clear(wsList);
    // The open one first, then in use, then archived.
    const rank = (w) => (w.id === state.workspaceId ? 0 : w.archived_at ? 2 : 1);
    wsList.append(...[...workspaces].sort((a, b) => rank(a) - rank(b)).map((w) => workspaceRow(w, refreshWorkspaces)));
  };
  try {
    await refreshWorkspaces();
  } catch (err) {
    failView(ctx, err);
    return;
  }

  // The workspace: its name; a new REAL one.
  const ws = state.workspace || {};
  const wsName = h('input', { id: 'case-ws-name', type: 'text', testid: 'case-ws-name', maxlength: '200', value: String(ws.name ?? '') });
  const wsSave = h('button', { type: 'submit', testid: 'case-ws-rename', text: t('cases_save') });
  const wsStatus = h('p', { class: 'form-status', role: 'status', hidden: true });
  const wsForm = h('form', { class: 'note-form', novalidate: true },
    h('label', { for: 'case-ws-name', text: t('cases_workspace_name') }), wsName,
    h('div', { class: 'form-actions' }, wsSave), wsStatus);
  wsForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = wsName.value.trim();
    const say = formSay(wsStatus);
    if (!name) return;
    wsSave.disabled = true;
    try {
      await api(`/api/v1/workspaces/${seg(state.workspaceId)}/rename`, { method: 'POST', body: { name } });
      state.workspace = { ...(state.workspace || {}), name };
      renderWorkspace();
      say(t('cases_workspace_renamed', { name }), 'ok');
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      wsSave.disabled = false;
    }
  });
  const newWs = h('input', { id: 'case-new-ws', type: 'text', testid: 'case-new-ws', maxlength: '200', autocomplete: 'off' });
  const newWsCreate = h('button', { type: 'submit', testid: 'case-ws-create', text: t('cases_workspace_create') });
  const newWsStatus = h('p', { class: 'form-status', testid: 'case-ws-status', role: 'status', hidden: true });
  const newWsForm = h('form', { class: 'note-form', novalidate: true },
    h('p', { class: 'muted small', text: t('cases_new_workspace_help') }),
    h('label', { for: 'case-new-ws', text: t('cases_workspace_name') }), newWs,
    h('div', { class: 'form-actions' }, newWsCreate), newWsStatus);
  newWsForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = newWs.value.trim();
    const say = formSay(newWsStatus);
    if (!name) return;
    newWsCreate.disabled = true;
    try {
      await api('/api/v1/workspaces', { method: 'POST', body: { name } });
      say(t('cases_workspace_created', { name }), 'ok');
      newWs.value = '';
      await refreshWorkspaces();
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      newWsCreate.disabled = false;
    }
  });

  finishView(ctx,
    h('article', { class: 'cases-view', testid: 'cases-view' },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('cases_heading') }),
        h('h1', { text: String(ws.name ?? '') })),
      h('div', { class: 'grid' },
        h('div', { class: 'col' }, section('nav_cases', 'cases-panel', list)),
        h('div', { class: 'col' },
          section('cases_new', 'case-new-panel', createForm),
          section('cases_workspace', 'case-ws-panel', wsForm),
          section('cases_workspaces', 'ws-panel', wsList),
          section('cases_new_workspace', 'case-new-ws-panel', newWsForm)))));
}

function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), 'Labfy'].join(' — ');
}

// ---------------------------------------------------------------------------
// Overview

// The appliance's processes as the supervisor reports them (all text via
// textContent, like everything else).
function renderProcesses(st) {
  if (!st || !Array.isArray(st.processes)) {
    return h('p', { class: 'muted', testid: 'processes-none', text: t('processes_none', { detail: String(st?.detail ?? '') }) });
  }
  return h('ol', { class: 'rows', testid: 'process-list' },
    ...st.processes.map((p) => {
      const role = String(p.role ?? '');
      const state = String(p.state ?? '');
      const detail = String(p.detail ?? '');
      // The supervisor's state in the chosen language; the process's own
      // words (English, from its code or its libraries) behind a toggle in
      // French (SPEC U4, U6: "running" and "not ready" are both said).
      const notReady = detail.startsWith('not ready');
      return h('li', { class: 'process', testid: 'process', dataset: { role, state } },
        h('strong', { text: hasLabel(`role_${role}`) ? t(`role_${role}`) : role }), ' ',
        h('span', { class: `badge badge-state-${cssToken(state)}`, testid: 'process-state', text: hasLabel(`proc_state_${state}`) ? t(`proc_state_${state}`) : state }), ' ',
        notReady ? h('span', { class: 'badge badge-state-unhealthy', testid: 'process-not-ready', text: t('proc_not_ready') }) : null, notReady ? ' ' : null,
        h('span', { class: 'muted small', text: t('restarts', { n: String(p.restarts ?? 0) }) }),
        !detail ? null
          : lang === 'fr' ? h('details', { class: 'muted small', testid: 'process-detail' }, h('summary', { text: t('proc_detail') }), h('p', { text: detail }))
            : h('p', { class: 'muted small', testid: 'process-detail', text: detail }));
    }));
}

async function renderOverview() {
  const ctx = beginView('view-overview', 'overview');
  setTitle(t('nav_overview'));
  if (state.bootError) {
    failView(ctx, state.bootError);
    return;
  }
  if (!state.workspaceId) {
    finishView(ctx, emptyNote('no_workspace', 'overview-empty'));
    return;
  }
  if (!state.investigationId) {
    finishView(ctx, emptyNote('no_investigation', 'overview-empty'));
    return;
  }
  const inv = state.investigationId;
  let data;
  try {
    data = await api(`/api/v1/investigations/${seg(inv)}/overview`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  if (data.workspace && typeof data.workspace === 'object') {
    state.workspace = { ...(state.workspace || {}), ...data.workspace };
    renderWorkspace();
  }
  const info = data.investigation || {};
  setTitle(info.title, t('nav_overview'));

  const correlations = h('div', { class: 'panel-body', testid: 'correlations' },
    h('p', { class: 'muted', text: t('loading') }));
  const processes = h('div', { class: 'panel-body', testid: 'processes' },
    h('p', { class: 'muted', text: t('loading') }));

  finishView(ctx,
    h('article', { class: 'overview', testid: 'overview', dataset: { investigation: String(info.id ?? inv) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('overview_heading') }),
        h('h1', { testid: 'overview-title', text: info.title ?? inv }),
        info.summary ? h('p', { class: 'summary', testid: 'overview-summary', text: info.summary }) : null,
        info.created_at ? h('p', { class: 'muted small' }, t('created_label'), ' ', timeEl(info.created_at)) : null),
      renderCounts(data.counts || {}),
      h('div', { class: 'grid' },
        h('div', { class: 'col' },
          section('section_top_entities', 'top-entities-panel', renderTopEntities(data.top_entities)),
          section('section_correlations', 'correlations-panel', correlations),
          section('section_entity_kinds', 'entity-kinds-panel', renderEntityKinds(data.entity_kinds))),
        h('div', { class: 'col' },
          section('section_recent_evidence', 'recent-evidence-panel', renderRecentEvidence(data.recent_evidence)),
          section('section_import', 'import-panel', renderImportForm(ctx, inv)),
          section('section_export', 'export-panel', renderExportForm(ctx, inv)),
          section('section_jobs', 'jobs-panel', renderJobs(data.jobs), renderExtractForm(ctx, inv, data.jobs)),
          section('section_processes', 'processes-panel', processes),
          section('section_note', 'note-panel', renderNoteForm(inv))))));

  api('/api/v1/status').then((st) => {
    if (ctx.live()) clear(processes).append(renderProcesses(st));
  }, (err) => {
    if (ctx.live()) clear(processes).append(h('p', { class: 'error-box', text: errorText(err) }));
  });

  try {
    const c = await api(`/api/v1/investigations/${seg(inv)}/correlations?limit=${CORRELATIONS_LIMIT}`);
    if (!ctx.live()) return;
    clear(correlations).append(renderCorrelations(c.correlations));
  } catch (err) {
    if (!ctx.live()) return;
    clear(correlations).append(h('p', { class: 'error-box', text: errorText(err) }));
  }
}

function renderCounts(counts) {
  const keys = ['evidence', 'entities', 'relations', 'provenance', 'jobs'];
  // Those with a list open it (SPEC U2); the others are figures, not links.
  return h('ul', { class: 'counts', testid: 'counts' },
    keys.map((k) => {
      const body = [
        h('span', { class: 'count-value', testid: `count-${k}`, dataset: { value: String(Number(counts[k] ?? 0)) }, text: fmtNumber(counts[k] ?? 0) }),
        h('span', { class: 'count-label', text: t(`count_${k}`) }),
      ];
      return LISTS.includes(k)
        ? h('li', { class: 'count count-link' }, h('a', { href: `#/list/${k}`, testid: `count-link-${k}` }, ...body))
        : h('li', { class: 'count' }, ...body);
    }));
}

function renderTopEntities(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'top-entities-empty');
  return h('ol', { class: 'rows', testid: 'top-entities' },
    items.map((e) => h('li', null,
      objectLink({ id: e.id, kind: e.kind, label: e.name }, 'top-entity'),
      h('span', { class: 'muted small', text: tn('in_evidence', Number(e.evidence_count ?? 0)) }))));
}

function renderCorrelations(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'correlations-empty');
  return h('ol', { class: 'rows', testid: 'correlation-list' },
    items.map((c) => {
      const ent = c.entity || {};
      const samples = Array.isArray(c.sample_evidence) ? c.sample_evidence : [];
      return h('li', { testid: 'correlation' },
        objectLink({ id: ent.id, kind: ent.kind, label: ent.name }, 'correlation-entity'),
        h('span', { class: 'muted small', text: tn('in_evidence', Number(c.evidence_count ?? 0)) }),
        samples.length
          ? h('span', { class: 'samples' }, samples.map((ref, i) =>
            h('a', { href: hrefFor(ref, 'evidence'), class: 'sample', testid: 'correlation-sample', title: String(ref), text: `#${i + 1}` })))
          : null);
    }));
}

function renderEntityKinds(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'entity-kinds-empty');
  return h('ul', { class: 'chips', testid: 'entity-kinds' },
    items.map((k) => h('li', { class: `chip kind-${cssToken(k.kind)}`, testid: 'entity-kind' },
      h('a', { href: listHref('entities', { kind: k.kind }), testid: 'entity-kind-link' },
        h('span', { text: enumLabel('kind', k.kind) }),
        h('span', { class: 'chip-count', text: fmtNumber(k.count) })))));
}

function renderRecentEvidence(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'recent-evidence-empty');
  return h('ol', { class: 'rows', testid: 'recent-evidence' },
    items.map((ev) => h('li', null,
      h('a', { href: hrefFor(ev.id, 'evidence'), class: 'obj', testid: 'recent-evidence-item', dataset: { ref: String(ev.id) } },
        h('span', { class: 'obj-label', text: ev.title ?? ev.id })),
      h('span', { class: 'muted small' },
        [ev.source, ev.mime].filter(Boolean).join(' · '),
        ev.collected_at ? ' · ' : null,
        ev.collected_at ? timeEl(ev.collected_at) : null))));
}

function renderJobs(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'jobs-empty');
  return h('ol', { class: 'rows', testid: 'jobs' },
    items.map((j) => {
      const p = Number(j.progress);
      const bar = Number.isFinite(p)
        ? h('progress', { max: p > 1 ? '100' : '1', value: String(Math.max(0, p)), title: t('job_progress') })
        : null;
      return h('li', { class: 'job', testid: 'job', dataset: { status: String(j.status ?? '') } },
        h('span', { class: 'job-kind', text: j.kind ? enumLabel('job_kind', j.kind) : j.id }),
        h('span', { class: `pill status-${cssToken(j.status)}`, text: enumLabel('status', j.status) }),
        bar,
        jobDetail(j) ? h('span', { class: 'muted small job-detail', testid: 'job-detail', text: jobDetail(j) }) : null,
        j.updated_at ? h('span', { class: 'muted small' }, timeEl(j.updated_at)) : null);
    }));
}

// A job's detail in the chosen language where its figures are known; the
// stored one-line detail otherwise.
function jobDetail(j) {
  const st = j.stats || {};
  if (j.kind === 'export' && typeof st.fingerprint === 'string') {
    return `${t('export_done', { files: fmtNumber(st.files ?? 0) })} ${t('export_fingerprint')} : ${st.fingerprint.slice(0, 16)}…`;
  }
  if (j.kind === 'import' && Number.isFinite(Number(st.files))) {
    return [tn('import_n_files', Number(st.files)),
      ...['imported', 'duplicates', 'refused', 'embedded'].map((k) => tn(`import_n_${k}`, Number(st[k] ?? 0)))].join(' · ');
  }
  if (j.kind === 'extraction' && Number.isFinite(Number(st.scanned))) {
    return t('job_extraction_detail', {
      scanned: fmtNumber(st.scanned), to_scan: fmtNumber(st.to_scan),
      mentions: fmtNumber(st.mentions), entities: fmtNumber(st.entities_created),
    });
  }
  return j.detail || '';
}

const EXTRACT_POLL_MS = 500;

// Starts the extraction of the investigation's selectors (SPEC C4) and
// follows its job until it ends; the overview then reloads with the graph it
// filled. A job already running is followed the same way.
function renderExtractForm(ctx, inv, jobs) {
  const button = h('button', { type: 'button', testid: 'extract-start', text: t('extract_start') });
  const status = h('p', { class: 'form-status', testid: 'extract-status', role: 'status', hidden: true });
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  const follow = async (job) => {
    button.disabled = true;
    let j = job;
    while (ctx.live() && j.status === 'RUNNING') {
      say(`${t('extract_started')} ${jobDetail(j)}`, 'info');
      await new Promise((r) => setTimeout(r, EXTRACT_POLL_MS));
      if (!ctx.live()) return;
      try {
        j = await api(`/api/v1/jobs/${seg(j.id)}`);
      } catch (err) {
        say(errorText(err), 'error');
        button.disabled = false;
        return;
      }
    }
    if (!ctx.live()) return;
    button.disabled = false;
    if (j.status === 'SUCCEEDED') {
      const st = j.stats || {};
      setStatusAfterRoute(t('extract_done', { mentions: fmtNumber(st.mentions ?? 0), entities: fmtNumber(st.entities_created ?? 0) }), 'ok');
      route();
    } else {
      say(t('extract_failed'), 'error');
    }
  };
  button.addEventListener('click', async () => {
    button.disabled = true;
    say(t('extract_started'), 'info');
    try {
      const job = await api(`/api/v1/investigations/${seg(inv)}/extraction`, { method: 'POST', body: {} });
      await follow(job);
    } catch (err) {
      say(errorText(err), 'error');
      showError(err);
      button.disabled = false;
    }
  });
  const running = Array.isArray(jobs) ? jobs.find((j) => j.kind === 'extraction' && j.status === 'RUNNING') : null;
  if (running) queueMicrotask(() => follow(running));
  return h('div', { class: 'extract-form', testid: 'extract-form' },
    h('p', { class: 'muted small', text: t('extract_help') }),
    h('div', { class: 'form-actions' }, button),
    status);
}

// ---------------------------------------------------------------------------
// Import (SPEC C2): files dropped or chosen are sent in batches as
// multipart/form-data to an import job; the bytes sent show as a progress
// bar, each file's outcome as a line of the report. The last report stays
// on the overview until another import starts.

const IMPORT_BATCH_FILES = 50;
const IMPORT_BATCH_BYTES = 64 * 1024 * 1024;
const IMPORT_REQUEST_TIMEOUT_MS = 10 * 60 * 1000;
let lastImport = null; // { inv, lines: [{path, outcome, evidence, reason}], summary, kind }

// One batch, with the bytes sent reported as they go.
function uploadBatch(job, files, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const f of files) form.append('file', f, f.webkitRelativePath || f.name);
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/v1/imports/${seg(job)}/files`);
    xhr.setRequestHeader('Accept', 'application/json');
    const token = state.csrf || metaToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    xhr.timeout = IMPORT_REQUEST_TIMEOUT_MS;
    xhr.upload.addEventListener('progress', (e) => onProgress(e.loaded));
    xhr.addEventListener('load', () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status >= 200 && xhr.status < 300 && data && Array.isArray(data.files)) {
        resolve(data.files);
      } else {
        const e = data && data.error ? data.error : {};
        reject(new ApiError(xhr.status, String(e.code ?? 'http_error'), String(e.message ?? xhr.statusText ?? ''), xhr.getResponseHeader('Retry-After')));
      }
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', t('err_unexpected'), null)));
    xhr.addEventListener('timeout', () => reject(new ApiError(0, 'timeout', t('err_unexpected'), null)));
    xhr.send(form);
  });
}

// Refusal reasons and parser notes are written by Labfy's own code in
// English, in a fixed wording; in French each known one is said in French,
// its figures kept (an unknown one is shown as written).
const IMPORT_PHRASES = [
  [/^empty file \(0 bytes\)$/, () => 'fichier vide (0 octet)'],
  [/^larger than the bound of (\d+) bytes$/, (m) => `plus grand que la limite de ${fmtNumber(m[1])} octets`],
  [/^larger than the bound \((\d+) bytes > (\d+)\)$/, (m) => `plus grand que la limite (${fmtNumber(m[1])} octets > ${fmtNumber(m[2])})`],
  [/^(file name|path) contains control characters$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient des caractères de contrôle`],
  [/^(file name|path) contains a `\.\.` component$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient un composant « .. »`],
  [/^empty (file name|path)$/, () => 'nom de fichier vide'],
  [/^(file name|path) longer than (\d+) characters$/, (m) => `nom plus long que ${fmtNumber(m[2])} caractères`],
  [/^the disk is full$/, () => 'le disque est plein'],
  [/^symbolic link pointing outside the imported folder$/, () => 'lien symbolique vers l’extérieur du dossier importé'],
  [/^text not extracted: (.*)$/, (m) => `texte non extrait : ${m[1]}`],
  [/^text cut at (\d+) bytes of (\d+)$/, (m) => `texte coupé à ${fmtNumber(m[1])} octets sur ${fmtNumber(m[2])}`],
  [/^no text layer \(a scan\?\)$/, () => 'pas de couche texte (un document numérisé ?)'],
  [/^only the first (\d+) (attachments|of (\d+) messages) were taken$/, (m) => (m[3]
    ? `seuls les ${m[1]} premiers des ${fmtNumber(m[3])} messages ont été pris`
    : `seules les ${m[1]} premières pièces jointes ont été prises`)],
  [/^inflated size above (\d+) bytes: text cut$/, (m) => `plus de ${fmtNumber(m[1])} octets une fois décompressé : texte coupé`],
];

function importPhrase(text) {
  const raw = String(text ?? '');
  if (lang !== 'fr') return raw;
  for (const [re, say] of IMPORT_PHRASES) {
    const m = raw.match(re);
    if (m) return say(m);
  }
  return raw;
}

function importLine(l) {
  const outcome = String(l.outcome ?? '');
  return h('li', { class: `import-line outcome-${cssToken(outcome)}`, testid: 'import-line', dataset: { outcome } },
    h('span', { class: `pill status-${outcome === 'refused' ? 'failed' : (outcome === 'imported' ? 'succeeded' : 'queued')}`, text: enumLabel('import_outcome', outcome) }),
    l.evidence
      ? h('a', { href: hrefFor(l.evidence, 'evidence'), class: 'import-path', testid: 'import-line-link', text: String(l.path ?? '') })
      : h('span', { class: 'import-path', text: String(l.path ?? '') }),
    l.reason ? h('span', { class: 'muted small import-reason', testid: 'import-reason', text: importPhrase(l.reason) }) : null);
}

function renderImportForm(ctx, inv) {
  const pickFiles = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-files' });
  const pickFolder = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-folder' });
  pickFolder.webkitdirectory = true;
  const filesButton = h('button', { type: 'button', testid: 'import-pick-files', text: t('import_pick_files') });
  const folderButton = h('button', { type: 'button', class: 'secondary', testid: 'import-pick-folder', text: t('import_pick_folder') });
  // A drop target for the mouse; the keyboard's way in is its two buttons
  // (a button holding buttons is not accessible: SPEC U7).
  const zone = h('div', { class: 'drop-zone', testid: 'import-drop', role: 'group', 'aria-label': t('import_drop') },
    h('p', { text: t('import_drop') }),
    h('p', { class: 'muted small', text: t('import_or') }),
    h('div', { class: 'form-actions' }, filesButton, folderButton));
  const bar = h('progress', { max: '1', value: '0', testid: 'import-progress', hidden: true });
  const status = h('p', { class: 'form-status', testid: 'import-status', role: 'status', hidden: true });
  const report = h('ol', { class: 'rows import-report', testid: 'import-report' });
  const reportHead = h('h3', { class: 'small', text: t('import_report'), hidden: true });
  const say = formSay(status);
  const show = (imp) => {
    clear(report);
    reportHead.hidden = true;
    if (!imp || imp.inv !== inv) return;
    // Refusals first: they are what needs the analyst's eye.
    const order = { refused: 0, imported: 1, duplicate: 2 };
    const sorted = [...imp.lines].sort((a, b) => (order[a.outcome] ?? 3) - (order[b.outcome] ?? 3));
    report.append(...sorted.map(importLine));
    reportHead.hidden = !sorted.length;
    if (imp.summary) say(imp.summary, imp.kind);
  };
  const busy = (on) => {
    filesButton.disabled = on;
    folderButton.disabled = on;
    zone.classList.toggle('busy', on);
  };
  const run = async (list) => {
    const files = Array.from(list || []);
    if (!files.length) return;
    busy(true);
    lastImport = { inv, lines: [], summary: '', kind: 'info' };
    show(lastImport);
    const total = files.reduce((n, f) => n + f.size, 0);
    let sentBefore = 0;
    let done = 0;
    bar.hidden = false;
    bar.max = String(Math.max(total, 1));
    bar.value = '0';
    const progress = (sentNow) => {
      bar.value = String(Math.min(total, sentBefore + sentNow));
      say(t('import_sending', { done: fmtNumber(done), total: fmtNumber(files.length), sent: fmtBytes(sentBefore + sentNow), bytes: fmtBytes(total) }), 'info');
    };
    try {
      const { job } = await api(`/api/v1/investigations/${seg(inv)}/imports`, { method: 'POST', body: { expected: files.length } });
      let batch = [];
      let batchBytes = 0;
      const flush = async () => {
        if (!batch.length) return;
        const size = batchBytes;
        progress(0);
        const lines = await paced(() => uploadBatch(job, batch, (n) => {
          progress(n);
          if (n >= size) say(t('import_reading'), 'info');
        }));
        sentBefore += size;
        done += batch.length;
        lastImport.lines.push(...lines);
        if (ctx.live()) show(lastImport);
        progress(0);
        batch = [];
        batchBytes = 0;
      };
      for (const f of files) {
        if (batch.length && (batch.length >= IMPORT_BATCH_FILES || batchBytes + f.size > IMPORT_BATCH_BYTES)) await flush();
        batch.push(f);
        batchBytes += f.size;
      }
      await flush();
      const st = await api(`/api/v1/imports/${seg(job)}/finish`, { method: 'POST', body: {} });
      lastImport.summary = t('import_done', {
        counts: ['imported', 'duplicates', 'refused', 'embedded'].map((k) => tn(`import_n_${k}`, Number(st[k] ?? 0))).join(', '),
      });
      // Refusals are listed first, in red; the summary itself is not an error.
      lastImport.kind = (st.refused ?? 0) > 0 ? 'info' : 'ok';
      // The overview again, with its new counts; the report stays under it.
      if (ctx.live()) route();
    } catch (err) {
      lastImport.summary = t('import_failed', { reason: errorText(err) });
      lastImport.kind = 'error';
      if (ctx.live()) {
        show(lastImport);
        showError(err);
      }
    } finally {
      busy(false);
      bar.hidden = true;
    }
  };
  filesButton.addEventListener('click', () => pickFiles.click());
  folderButton.addEventListener('click', () => pickFolder.click());
  pickFiles.addEventListener('change', () => run(pickFiles.files).finally(() => { pickFiles.value = ''; }));
  pickFolder.addEventListener('change', () => run(pickFolder.files).finally(() => { pickFolder.value = ''; }));
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', async (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    run(await droppedFiles(e.dataTransfer));
  });
  show(lastImport);
  return h('div', { class: 'import-form', testid: 'import-form' },
    zone, pickFiles, pickFolder,
    h('p', { class: 'muted small', text: t('import_help') }),
    bar, status, reportHead, report);
}

// The files of a drop, folders walked (their files carry their relative
// path, like a folder chosen with the picker).
async function droppedFiles(dt) {
  const items = Array.from(dt?.items || []).map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (!items.length || items.some((e) => !e)) return Array.from(dt?.files || []);
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((res, rej) => entry.file(res, rej));
      out.push(new File([file], `${prefix}${file.name}`, { type: file.type, lastModified: file.lastModified }));
      return;
    }
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
      if (!batch.length) break;
      for (const child of batch) await walk(child, `${prefix}${entry.name}/`);
    }
  };
  for (const e of items) await walk(e, '');
  return out;
}

// Export (SPEC C5): the bundle `labfy export` writes, made by a job beside
// the requests; its fingerprint, its folder, its archive and the command
// that verifies it.
const EXPORT_POLL_MS = 500;

function renderExportForm(ctx, inv) {
  const button = h('button', { type: 'button', testid: 'export-start', text: t('export_start') });
  const status = h('p', { class: 'form-status', testid: 'export-status', role: 'status', hidden: true });
  const result = h('div', { testid: 'export-result' });
  const say = formSay(status);
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(result);
    say(t('export_running'), 'info');
    try {
      let j = await api(`/api/v1/investigations/${seg(inv)}/export`, { method: 'POST', body: {} });
      j = await api(`/api/v1/jobs/${seg(j.job)}`);
      while (j.status === 'RUNNING') {
        await new Promise((r) => setTimeout(r, EXPORT_POLL_MS));
        j = await api(`/api/v1/jobs/${seg(j.id)}`);
      }
      if (!ctx.live()) return;
      if (j.status !== 'SUCCEEDED') {
        say(t('export_failed', { reason: j.detail || j.status }), 'error');
        return;
      }
      const st = j.stats || {};
      say(t('export_done', { files: fmtNumber(st.files ?? 0) }), 'ok');
      result.append(dl([
        [t('export_fingerprint'), h('code', { class: 'hash', testid: 'export-fingerprint', text: String(st.fingerprint ?? '') }), 'export-fingerprint-row'],
        [t('export_dir'), h('code', { class: 'camp-url', testid: 'export-dir', text: String(st.dir ?? '') }), 'export-dir-row'],
        [t('export_verify'), h('code', { class: 'camp-url', testid: 'export-verify', text: `labfy verify ${st.dir ?? ''} --fingerprint ${st.fingerprint ?? ''}` }), 'export-verify-row'],
      ], 'export-meta'),
      h('p', null, h('a', { href: `/api/v1/exports/${encodeURIComponent(String(st.archive ?? ''))}`, download: '', testid: 'export-download', text: t('export_download') })));
    } catch (err) {
      if (!ctx.live()) return;
      say(t('export_failed', { reason: errorText(err) }), 'error');
      showError(err);
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'extract-form', testid: 'export-form' },
    h('p', { class: 'muted small', text: t('export_help') }),
    h('div', { class: 'form-actions' }, button),
    status, result);
}

function renderNoteForm(inv) {
  const title = h('input', { id: 'note-title', type: 'text', testid: 'note-title', required: true, autocomplete: 'off', maxlength: String(NOTE_TITLE_MAX_CHARS) });
  const content = h('textarea', { id: 'note-content', rows: '5', testid: 'note-content', required: true });
  const submit = h('button', { type: 'submit', testid: 'note-submit', text: t('note_submit') });
  const status = h('p', { class: 'form-status', testid: 'note-status', role: 'status', hidden: true });
  const form = h('form', { class: 'note-form', testid: 'note-form', novalidate: true },
    h('label', { for: 'note-title', text: t('note_title') }), title,
    h('label', { for: 'note-content', text: t('note_content') }), content,
    h('p', { class: 'muted small', text: t('note_help') }),
    h('div', { class: 'form-actions' }, submit),
    status);
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = { title: title.value.trim(), content: content.value, source: NOTE_SOURCE };
    if (!body.title || !body.content.trim()) {
      say(t('note_missing'), 'error');
      return;
    }
    submit.disabled = true;
    say(t('note_saving'), 'info');
    try {
      const created = await api(`/api/v1/investigations/${seg(inv)}/evidence`, { method: 'POST', body });
      say(t('note_saved', { title: created.title ?? body.title }), 'ok');
      form.reset();
      setStatusAfterRoute(t('note_saved', { title: created.title ?? body.title }), 'ok');
      location.hash = hrefFor(created.id, 'evidence');
    } catch (err) {
      say(errorText(err), 'error');
      showError(err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

// A message to show once the next view has started (beginView clears it).
let pendingStatus = null;
function setStatusAfterRoute(text, kind) {
  pendingStatus = { text, kind };
}
function flushPendingStatus() {
  if (pendingStatus) {
    setStatus(pendingStatus.text, pendingStatus.kind);
    pendingStatus = null;
  }
}

// ---------------------------------------------------------------------------
// Evidence reader

// How egress fetched an evidence item (SPEC E5): every value is the fetch's
// provenance as stored — untrusted text — and the body as received, to
// download (SPEC C3: kept whatever its type).
function renderFetch(f, ev) {
  const list = (xs) => (Array.isArray(xs) && xs.length
    ? h('ol', { class: 'agent-exclusion-list' }, xs.map((x) => h('li', null, h('code', { class: 'camp-url', text: Array.isArray(x) ? `${x[0]}: ${x[1]}` : String(x) }))))
    : t('res_none'));
  return section('fetch_heading', 'evidence-fetch',
    ev && ev.original
      ? h('p', null, h('a', { href: `/api/v1/evidence/${seg(ev.id)}/original`, download: '', testid: 'evidence-fetch-download', text: t('import_download') }))
      : null,
    dl([
    [t('fetch_url'), h('code', { class: 'camp-url', text: String(f.url ?? '') }), 'evidence-fetch-url'],
    [t('fetch_final_url'), h('code', { class: 'camp-url', text: String(f.final_url ?? '') }), 'evidence-fetch-final-url'],
    [t('fetch_redirects'), list(f.redirects), 'evidence-fetch-redirects'],
    [t('fetch_http'), String(f.http_status ?? '—'), 'evidence-fetch-http'],
    [t('fetch_content_type'), String(f.content_type ?? '—'), 'evidence-fetch-content-type'],
    [t('fetch_started'), timeEl(f.started_at), 'evidence-fetch-started'],
    [t('fetch_elapsed'), t('fetch_elapsed_value', { ms: fmtNumber(countOf(f.elapsed_ms)) }), 'evidence-fetch-elapsed'],
    [t('meta_sha256'), h('code', { class: 'hash', text: String(f.body_sha256 ?? '') }), 'evidence-fetch-sha256'],
    [t('fetch_isolation'), h('code', { class: 'hash', text: String(f.isolation ?? '') }), 'evidence-fetch-isolation'],
    [t('fetch_route'), enumLabel('route', f.route), 'evidence-fetch-route'],
    [t('fetch_campaign'), refLink(f.campaign, 'evidence-fetch-campaign'), 'evidence-fetch-campaign-row'],
    [t('fetch_grant'), refLink(f.grant, 'evidence-fetch-grant'), 'evidence-fetch-grant-row'],
    [t('fetch_headers'), list(f.headers), 'evidence-fetch-headers'],
  ], 'evidence-fetch-meta'));
}

// Each import of an evidence item's bytes (SPEC C2): the file it came from,
// how the confined parser read it, and the original to download.
function renderImports(ev) {
  const imports = Array.isArray(ev.imports) ? ev.imports : [];
  if (!imports.length) return null;
  return section('import_heading', 'evidence-imports',
    ev.original
      ? h('p', null, h('a', { href: `/api/v1/evidence/${seg(ev.id)}/original`, download: '', testid: 'evidence-download', text: t('import_download') }))
      : null,
    ...imports.map((i) => dl([
      [t('import_name'), String(i.original_name ?? ''), 'evidence-import-name'],
      [t('import_path'), h('code', { class: 'camp-url', text: String(i.original_path ?? '') }), 'evidence-import-path'],
      [t('import_size'), t('import_bytes', { bytes: fmtNumber(i.byte_len ?? 0) }), 'evidence-import-size'],
      [t('import_format'), enumLabel('format', i.format), 'evidence-import-format'],
      i.encoding ? [t('import_encoding'), String(i.encoding), 'evidence-import-encoding'] : null,
      Array.isArray(i.notes) && i.notes.length
        ? [t('import_notes'), h('ul', null, i.notes.map((n) => h('li', { text: importPhrase(n) }))), 'evidence-import-notes']
        : null,
      [t('import_by'), enumLabel('actor', i.imported_by), 'evidence-import-by'],
      [t('import_at'), timeEl(i.imported_at), 'evidence-import-at'],
    ].filter(Boolean), 'evidence-import')));
}

async function renderEvidence(ref) {
  const ctx = beginView('view-evidence', 'evidence');
  setTitle(t('evidence_heading'));
  let ev;
  try {
    ev = await api(`/api/v1/evidence/${seg(ref)}`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  setTitle(ev.title, t('evidence_heading'));

  const pre = h('pre', { class: 'reader-text', testid: 'evidence-text', dataset: { state: 'loading' } });
  const progress = h('p', { class: 'muted small', testid: 'evidence-progress' });
  const more = h('button', { type: 'button', class: 'more', testid: 'evidence-more', text: t('reader_more'), hidden: true });
  const readerError = h('p', { class: 'error-box', testid: 'evidence-text-error', hidden: true });

  const entities = Array.isArray(ev.entities) ? ev.entities : [];
  const size = t('size_value', { bytes: fmtNumber(ev.byte_len ?? 0), chars: fmtNumber(ev.char_len ?? 0) });

  const shown = finishView(ctx,
    h('article', { class: 'evidence', testid: 'evidence-view', dataset: { ref: String(ev.id ?? ref) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('evidence_heading') }),
        h('h1', { testid: 'evidence-title', text: ev.title ?? ev.id }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          h('a', { href: `#/node/${seg(ev.id ?? ref)}`, testid: 'evidence-neighbours-link', text: t('link_neighbours') }),
          h('a', { href: `#/provenance/${seg(ev.id ?? ref)}`, testid: 'evidence-provenance-link', text: t('link_provenance') }))),
      dl([
        [t('meta_source'), ev.source ?? '—', 'evidence-source'],
        [t('meta_collected'), timeEl(ev.collected_at), 'evidence-collected'],
        [t('meta_created'), timeEl(ev.created_at), 'evidence-created'],
        [t('meta_mime'), ev.mime ?? '—', 'evidence-mime'],
        [t('meta_size'), size, 'evidence-size'],
        [t('meta_sha256'), h('code', { class: 'hash', text: ev.sha256 ?? '—' }), 'evidence-sha256'],
        [t('meta_id'), h('code', { class: 'hash', text: ev.id ?? ref }), 'evidence-id'],
      ], 'evidence-meta'),
      ev.fetch && typeof ev.fetch === 'object' ? renderFetch(ev.fetch, ev) : null,
      renderImports(ev),
      h('div', { class: 'reader' },
        h('section', { class: 'panel reader-main', testid: 'evidence-reader' },
          h('h2', { text: t('reader_text') }), pre, readerError,
          h('div', { class: 'reader-foot' }, progress, more)),
        h('section', { class: 'panel reader-side', testid: 'evidence-entities-panel' },
          h('h2', { text: t('reader_entities') }),
          entities.length
            ? h('ol', { class: 'rows', testid: 'evidence-entities' },
              entities.map((e) => h('li', null,
                objectLink({ id: e.id, kind: e.kind, label: e.name }, 'evidence-entity'),
                e.relation ? h('span', { class: 'muted small', text: enumLabel('rel', e.relation) }) : null)))
            : emptyNote('reader_no_entities', 'evidence-entities-empty')))));
  if (!shown) return;

  let offset = 0;
  let total = Number(ev.char_len ?? 0);
  const loadPage = async () => {
    more.disabled = true;
    readerError.hidden = true;
    pre.dataset.state = 'loading';
    try {
      const page = await api(`/api/v1/evidence/${seg(ev.id ?? ref)}/excerpt?offset=${offset}&length=${EXCERPT_PAGE}`);
      if (!ctx.live()) return;
      const text = String(page.text ?? '');
      pre.append(document.createTextNode(text));
      const got = Number.isInteger(page.length) ? page.length : Array.from(text).length;
      offset = (Number.isInteger(page.offset) ? page.offset : offset) + got;
      if (Number.isFinite(Number(page.total_chars))) total = Number(page.total_chars);
      more.hidden = !(page.truncated && got > 0);
      pre.dataset.state = more.hidden ? 'complete' : 'partial';
      progress.textContent = total === 0 && offset === 0
        ? t('reader_empty')
        : t('reader_progress', { shown: fmtNumber(Math.min(offset, total || offset)), total: fmtNumber(total || offset) });
    } catch (err) {
      if (!ctx.live()) return;
      pre.dataset.state = 'error';
      readerError.textContent = errorText(err);
      readerError.hidden = false;
      more.hidden = offset === 0;
      showError(err);
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener('click', loadPage);
  await loadPage();
}

// ---------------------------------------------------------------------------
// Node view

async function renderNode(ref) {
  const ctx = beginView('view-node', 'node');
  setTitle(t('node_heading'));
  let node;
  let nb;
  let limit = NEIGHBOURS_PAGE;
  const nbUrl = () => `/api/v1/graph/nodes/${seg(ref)}/neighbors?limit=${limit}`;
  try {
    [node, nb] = await Promise.all([api(`/api/v1/graph/nodes/${seg(ref)}`), api(nbUrl())]);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  setTitle(node.label, t('node_heading'));

  const list = h('ol', { class: 'rows neighbours', testid: 'neighbours' });
  const count = h('p', { class: 'muted small', testid: 'neighbours-total' });
  const more = h('button', { type: 'button', class: 'more', testid: 'neighbours-more', text: t('neighbours_more'), hidden: true });
  const nbError = h('p', { class: 'error-box', hidden: true });

  const fill = (data) => {
    const items = Array.isArray(data.neighbors) ? data.neighbors : [];
    const total = Number(data.total ?? items.length);
    clear(list);
    if (items.length === 0) list.append(h('li', { class: 'muted empty', testid: 'neighbours-empty', text: t('neighbours_none') }));
    for (const item of items) {
      const rel = item.relation || {};
      const other = item.node || {};
      const out = rel.direction !== 'in';
      const conf = Number(rel.confidence);
      list.append(h('li', { class: 'neighbour-row' },
        h('span', { class: `dir dir-${out ? 'out' : 'in'}`, title: t(out ? 'dir_out' : 'dir_in'), 'aria-label': t(out ? 'dir_out' : 'dir_in'), text: out ? '→' : '←' }),
        h('span', { class: 'rel', testid: 'neighbour-relation', text: enumLabel('rel', rel.kind) }),
        objectLink(other, 'neighbour'),
        Number.isFinite(conf) && rel.confidence !== null
          ? h('span', { class: 'muted small conf', text: t('confidence', { v: fmtNumber(conf) }) })
          : null));
    }
    count.dataset.total = String(total);
    count.dataset.shown = String(items.length);
    count.textContent = t('neighbours_count', { shown: fmtNumber(items.length), total: fmtNumber(total) });
    more.hidden = items.length >= total || items.length < limit || limit >= NEIGHBOURS_MAX;
  };

  more.addEventListener('click', async () => {
    more.disabled = true;
    nbError.hidden = true;
    limit = Math.min(limit + NEIGHBOURS_PAGE, NEIGHBOURS_MAX);
    try {
      const data = await api(nbUrl());
      if (!ctx.live()) return;
      fill(data);
    } catch (err) {
      if (!ctx.live()) return;
      limit = Math.max(NEIGHBOURS_PAGE, limit - NEIGHBOURS_PAGE);
      nbError.textContent = errorText(err);
      nbError.hidden = false;
      showError(err);
    } finally {
      more.disabled = false;
    }
  });

  const details = node.details && typeof node.details === 'object' ? Object.entries(node.details) : [];
  const id = node.id ?? ref;
  // The drawing (SPEC U1) beside the list it draws.
  const graph = node.kind === 'entity' || node.kind === 'evidence' ? egoGraph(graphUi(ctx), id) : null;
  if (graph) state.leaveView.push(graph.destroy);
  const shown = finishView(ctx,
    h('article', { class: 'node', testid: 'node-view', dataset: { ref: String(id), kind: String(node.kind ?? '') } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow' },
          h('span', { class: `kind kind-${cssToken(displayKind(node))}`, testid: 'node-kind', text: enumLabel('kind', displayKind(node)) }),
          node.subkind && displayKind(node) !== node.subkind
            ? h('span', { class: 'muted', testid: 'node-subkind', text: ` · ${node.subkind}` })
            : null),
        h('h1', { testid: 'node-label', text: node.label ?? id }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          isEvidence(id, node.kind)
            ? h('a', { href: `#/evidence/${seg(id)}`, testid: 'node-open-evidence', text: t('link_open_evidence') })
            : null,
          h('a', { href: `#/provenance/${seg(id)}`, testid: 'node-provenance-link', text: t('link_provenance') }))),
      h('div', { class: graph ? 'graph-row' : 'grid' },
        graph ? graph.el : null,
        h('div', { class: 'col col-wide' },
          h('section', { class: 'panel neighbours-panel', testid: 'neighbours-panel' },
            h('h2', { text: t('neighbours') }), count, list, nbError, more))),
      h('div', { class: 'grid node-facts' },
        h('div', { class: 'col' },
          h('section', { class: 'panel', testid: 'node-details-panel' },
            h('h2', { text: t('node_details') }),
            dl([
              [t('meta_id'), h('code', { class: 'hash', text: id })],
              ...(node.degree !== undefined ? [[t('node_degree'), fmtNumber(node.degree)]] : []),
              ...details.map(([k, v]) => [enumLabel('detail', k), detailValue(k, v)]),
            ], 'node-details'),
            details.length === 0 ? emptyNote('node_no_details') : null)),
        node.kind === 'entity' ? h('div', { class: 'col' }, renderEntityEdit(ctx, node)) : null)));
  if (!shown) return;
  fill(nb);
}

// What graph.js needs from this page: its helpers, and whether the view it
// was drawn for is still the one shown.
function graphUi(ctx) {
  return {
    api, t, h, clear, enumLabel, fmtNumber, hrefFor, seg, errorText, shown,
    live: ctx.live,
    onError: showError,
    go: (href) => { location.hash = href; },
  };
}

const RELATION_KINDS = ['linked_to', 'mentions', 'works_for', 'owns_domain', 'uses_email', 'uses_phone', 'located_in', 'derived_from'];

// The analyst's hand on an entity (SPEC C4): rename, merge into another,
// link to another object, delete. Each change goes through the API (audited,
// provenance `analyst`) and the view reloads with the result.
function renderEntityEdit(ctx, node) {
  const id = String(node.id);
  const status = h('p', { class: 'form-status', testid: 'edit-status', role: 'status', hidden: true });
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  const act = async (button, call, done) => {
    button.disabled = true;
    say('', 'info');
    try {
      const out = await call();
      if (!ctx.live()) return;
      done(out);
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      button.disabled = false;
    }
  };
  const name = h('input', { type: 'text', id: 'edit-name', testid: 'edit-name', value: String(node.label ?? ''), autocomplete: 'off' });
  const rename = h('button', { type: 'button', testid: 'edit-rename', text: t('edit_rename') });
  rename.addEventListener('click', () => act(rename,
    () => api(`/api/v1/entities/${seg(id)}/rename`, { method: 'POST', body: { name: name.value } }),
    () => { setStatusAfterRoute(t('edit_renamed'), 'ok'); route(); }));
  const into = h('input', { type: 'text', id: 'edit-merge', testid: 'edit-merge-into', placeholder: 'entity:…', autocomplete: 'off' });
  const merge = h('button', { type: 'button', testid: 'edit-merge', text: t('edit_merge') });
  merge.addEventListener('click', () => act(merge,
    () => api(`/api/v1/entities/${seg(id)}/merge`, { method: 'POST', body: { into: into.value.trim() } }),
    (kept) => { setStatusAfterRoute(t('edit_merged'), 'ok'); location.hash = hrefFor(kept.id, 'entity'); }));
  const relKind = h('select', { testid: 'edit-link-kind', 'aria-label': t('edit_link') },
    RELATION_KINDS.map((k) => h('option', { value: k, text: enumLabel('rel', k) })));
  const target = h('input', { type: 'text', id: 'edit-link', testid: 'edit-link-target', placeholder: 'entity:… / evidence:…', autocomplete: 'off' });
  const link = h('button', { type: 'button', testid: 'edit-link', text: t('edit_link') });
  link.addEventListener('click', () => act(link,
    () => api(`/api/v1/investigations/${seg(state.investigationId)}/relations`, { method: 'POST', body: { kind: relKind.value, src: id, dst: target.value.trim() } }),
    () => { setStatusAfterRoute(t('edit_linked'), 'ok'); route(); }));
  const del = h('button', { type: 'button', class: 'danger', testid: 'edit-delete', text: t('edit_delete') });
  let armed = false;
  del.addEventListener('click', () => {
    if (!armed) {
      armed = true;
      del.textContent = t('edit_delete_confirm');
      return;
    }
    act(del, () => api(`/api/v1/entities/${seg(id)}`, { method: 'DELETE' }), () => {
      setStatusAfterRoute(t('edit_deleted', { name: node.label ?? id }), 'ok');
      location.hash = '#/';
    });
  });
  return h('section', { class: 'panel entity-edit', testid: 'entity-edit' },
    h('h2', { text: t('edit_heading') }),
    h('label', { for: 'edit-name', text: t('edit_rename') }), h('div', { class: 'form-actions' }, name, rename),
    h('label', { for: 'edit-merge', text: t('edit_merge_label') }), h('div', { class: 'form-actions' }, into, merge),
    h('label', { for: 'edit-link', text: t('edit_link_label') }), h('div', { class: 'form-actions' }, relKind, target, link),
    h('div', { class: 'form-actions' }, del),
    status);
}

// ---------------------------------------------------------------------------
// Provenance trail

async function renderProvenance(ref) {
  const ctx = beginView('view-provenance', 'provenance');
  setTitle(t('prov_heading'));
  let data;
  try {
    data = await api(`/api/v1/provenance/${seg(ref)}?depth=${PROVENANCE_DEPTH}`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  const records = (Array.isArray(data.records) ? data.records : [])
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (Number(a.r.depth ?? 0) - Number(b.r.depth ?? 0)) || (a.i - b.i))
    .map((x) => x.r);
  const rootRecord = records.find((r) => r.object && r.object.id === (data.root ?? ref));
  const rootLabel = rootRecord && rootRecord.object.label ? rootRecord.object.label : (data.root ?? ref);
  setTitle(rootLabel, t('prov_heading'));
  const rootKind = rootRecord && rootRecord.object ? rootRecord.object.kind : undefined;

  finishView(ctx,
    h('article', { class: 'provenance', testid: 'provenance-view', dataset: { ref: String(data.root ?? ref) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('prov_heading') }),
        h('h1', { testid: 'provenance-title', text: t('prov_of', { label: rootLabel }) }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          h('a', { href: hrefFor(data.root ?? ref, rootKind), testid: 'provenance-root-link', text: rootLabel }))),
      records.length === 0
        ? emptyNote('prov_empty', 'provenance-empty')
        : h('ol', { class: 'trail', testid: 'provenance-records' },
          records.map((r) => {
            const inputs = Array.isArray(r.inputs) ? r.inputs : [];
            const obj = r.object || {};
            return h('li', { class: 'trail-step', testid: 'provenance-record', dataset: { depth: String(r.depth ?? 0) } },
              h('div', { class: 'trail-head' },
                h('span', { class: 'pill depth', text: t('prov_depth', { n: fmtNumber(r.depth ?? 0) }) }),
                obj.id ? objectLink(obj, 'provenance-object') : null),
              dl([
                [t('prov_producer'), r.producer ?? '—'],
                [t('prov_activity'), r.activity ?? '—'],
                [t('prov_time'), timeEl(r.created_at)],
                [t('prov_inputs'), inputs.length
                  ? h('ul', { class: 'inline-list' }, inputs.map((inp) => h('li', null, objectLink(inp, 'provenance-input'))))
                  : h('span', { class: 'muted', text: t('prov_no_inputs') })],
              ]));
          })),
      data.truncated ? h('p', { class: 'muted small', testid: 'provenance-truncated', text: t('prov_truncated', { n: PROVENANCE_DEPTH }) }) : null));
}

// ---------------------------------------------------------------------------
// Agent panel (SPEC G, M6–M10): the agent's mode (the runtime's status), the
// tool catalog, a question, and the runtime turn it starts — the
// deterministic demo agent or the local model, driven by the server's
// AgentRuntime. The runtime turn (status, rounds, tool calls, repairs,
// summary, error) and its events are polled; the plan, tool results and
// tool activity come from the gateway turn it drives (its event log), and
// the human decision on the research the agent prepares goes through the
// research routes, then the runtime resumes the turn. Questions, plans,
// observations, diagnostics, artifacts, event lines, errors and summaries
// come from the agent, the model, the tools or evidence: all of it is text
// (textContent), and object_refs only ever become links to this page's own
// views of existing objects. The runtime exposes no prompt and no private
// reasoning, and none is shown.

const AGENT_POLL_MS = 1000;
const AGENT_STATUS_RETRY_MS = 5000; // a local model not ready yet is asked again this often
const RT_EVENTS_PAGE = 128; // the runtime's MAX_EVENTS_PER_POLL
const RT_BOOT_PAGES = 3; // the runtime keeps 256 events: two pages, and one to spare
const RT_BUSY = new Set(['QUEUED', 'RUNNING']);
const RT_LIVE = new Set(['QUEUED', 'RUNNING', 'AUTHORIZATION_REQUIRED']);
const RT_END_ERRORS = new Set(['FAILED', 'CANCELLED', 'MODEL_UNAVAILABLE', 'MODEL_PROTOCOL_ERROR', 'BUDGET_EXHAUSTED']);
const AGENT_AFTER_ACTION_POLLS = 3; // polls after an action, even when idle
const AGENT_QUESTION_MAX = 512;
const AGENT_EXCLUSIONS_MAX = 8;
const AGENT_ACTIVITY_MAX = 200;
const AGENT_ARTIFACT_PREVIEW = 4000;
const GRANT_HOSTS_MAX = 16;
const GRANT_URLS_MAX = 32; // the store's MAX_CAMPAIGN_URLS
const FINGERPRINT_PREFIX = 16;
const CAMPAIGN_POLL_MS = 2000; // a campaign that has not ended is read again this often
const CAMPAIGN_LIVE = new Set(['PENDING', 'ADMITTED', 'RUNNING']);

const agent = {
  status: null, // the runtime's status: { driver, label, ready, detail, queued, closed }
  statusError: null,
  statusTimer: null,
  catalog: null,
  catalogError: null,
  rt: null, // the current runtime turn: the API's RuntimeTurn, refreshed by polling
  rtCursor: 0, // runtime event log cursor
  rtSeen: new Set(), // runtime event sequences of the current turn
  fetchRt: false, // the current runtime turn must be read again
  resumed: false, // a resume was queued: when it settles, the review and overview are read again
  resumeRefused: null, // the detail of a `turn.resume_refused` event
  cancel: '', // '' | 'pending' | 'done' | 'error': the Cancel request of the current turn
  startKey: null, // { key, sig }: the idempotency key of a submission still waiting for its answer
  cursor: 0, // gateway event log cursor
  gwFrom: 0, // gateway cursor when the current runtime turn was started: its gateway events follow it
  gen: 0, // bumped when the current turn changes; stale polls are dropped
  rev: 0, // bumped when an action (cancel, resume) changes the runtime turn; polls read before are dropped
  timer: null,
  polling: false,
  afterPolls: 0,
  pollError: null,
  missed: false,
  starting: false,
  turn: null, // the gateway turn the runtime turn drives: { turn_id, status, … } kept up to date by its events
  seen: new Set(), // gateway event sequences of the current turn
  plan: null, // { steps, done }
  cards: [], // agent.tool.completed payloads
  activity: [], // gateway and runtime events of the current turn
  results: new Map(), // result_id → { open, loading, data, error }
  review: null, // { id, loading, request, fingerprint, risk, error, note }
  campaignTimer: null, // the next read of a campaign that has not ended
  riskHint: null,
  formNote: null, // { kind, text: () => string }
};

// The runtime turn waits for the worker or runs: it can be cancelled.
function rtBusy() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_BUSY.has(agent.rt.status);
}

// The runtime turn is not over (it may still change): it is polled, and a
// turn started elsewhere does not replace it.
function rtLive() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_LIVE.has(agent.rt.status);
}

// A fresh idempotency key (M6): one per submission.
function newIdempotencyKey() {
  if (window.crypto && typeof window.crypto.randomUUID === 'function') return `ui-${window.crypto.randomUUID()}`;
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function lines(text, max) {
  return String(text ?? '').split('\n').map((x) => x.trim()).filter(Boolean).slice(0, max);
}

function refKind(ref) {
  const s = String(ref ?? '');
  const i = s.indexOf(':');
  return i > 0 ? s.slice(0, i) : '';
}

// An object reference: a link to its view when the reader has one
// (evidence, entity), else the reference as code.
function refLink(ref, testid = 'agent-ref') {
  const s = String(ref ?? '');
  const kind = refKind(s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, dataset: { ref: s, kind }, text: s });
  }
  return h('code', { class: 'agent-ref hash', testid, dataset: { ref: s, kind }, text: s });
}

function refList(refs, testid) {
  const items = Array.isArray(refs) ? refs : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'inline-list agent-refs', testid }, items.map((r) => h('li', null, refLink(r))));
}

function fingerprintEl(fp, testid) {
  const full = String(fp ?? '');
  return h('code', { class: 'hash', testid, title: full, dataset: { full }, text: full.slice(0, FINGERPRINT_PREFIX) });
}

// A risk level in the chosen language (SPEC U4); the level itself stays in
// `data-risk` for scripts.
function riskPill(level, testid, title = t('agent_risk_title')) {
  const l = String(level ?? '?');
  return h('span', { class: `pill risk risk-${cssToken(l)}`, testid, title, dataset: { risk: l }, text: enumLabel('risk', l) });
}

// The selection by title (SPEC U5): each reference's label, read once from
// the graph and kept while the page lives; the id until it is known.
const refLabels = new Map();
async function loadRefLabels(refs) {
  const missing = (Array.isArray(refs) ? refs : []).map(String)
    .filter((r) => !refLabels.has(r) && (refKind(r) === 'evidence' || refKind(r) === 'entity'));
  if (missing.length === 0) return false;
  await Promise.all(missing.map(async (r) => {
    try {
      const node = await api(`/api/v1/graph/nodes/${seg(r)}`);
      refLabels.set(r, { label: String(node.label ?? r), kind: displayKind(node) });
    } catch {
      refLabels.set(r, { label: r, kind: '' });
    }
  }));
  return true;
}

function selectionList(refs, testid) {
  const items = Array.isArray(refs) ? refs.map(String) : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'agent-selection', testid }, items.map((r) => {
    const known = refLabels.get(r);
    return h('li', null,
      labelLink(r, known ? known.label : r, 'agent-ref'),
      known && known.kind ? h('span', { class: `kind kind-${cssToken(known.kind)}`, text: enumLabel('kind', known.kind) }) : null);
  }));
}

function statusPill(prefix, value, testid) {
  const v = String(value ?? '');
  return h('span', { class: `pill status-${cssToken(v)}`, testid, dataset: { status: v }, text: enumLabel(prefix, v) });
}

function clockTime(value) {
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return h('time', { text: String(value ?? '') });
  const el = h('time', { text: new Intl.DateTimeFormat(LOCALES[lang], { timeStyle: 'medium' }).format(d) });
  el.setAttribute('datetime', String(value));
  el.title = String(value);
  return el;
}

function noteEl(el, note) {
  el.textContent = note ? note.text() : '';
  el.dataset.kind = note ? note.kind : '';
  el.hidden = !note;
}

// ----- state changes

// Makes `rt` (a runtime turn) the current one. Its gateway events are read
// from `gwFrom` once the runtime says which gateway turn it drives.
function agentSetRuntimeTurn(rt, gwFrom) {
  agent.gen += 1;
  agent.rt = { ...rt, turn_id: String(rt.turn_id ?? '') };
  agent.rtSeen = new Set();
  agent.fetchRt = false;
  agent.resumed = false;
  agent.resumeRefused = null;
  agent.cancel = '';
  agent.gwFrom = gwFrom;
  agent.turn = null;
  agent.seen = new Set();
  agent.plan = null;
  agent.cards = [];
  agent.activity = [];
  agent.results = new Map();
  agent.review = null;
  agent.riskHint = null;
  agent.missed = false;
}

function pushActivity(item) {
  agent.activity.push(item);
  if (agent.activity.length > AGENT_ACTIVITY_MAX) agent.activity.splice(0, agent.activity.length - AGENT_ACTIVITY_MAX);
}

// Applies one runtime event (`{seq, turn_id, kind, detail, at}`) to the
// current turn. Returns true when something shown changed.
function rtIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  const kind = String(ev.kind ?? '');
  if (!agent.rt || turnId !== agent.rt.turn_id) {
    // A turn started elsewhere (another tab, an API client) becomes the
    // current one only while ours is idle.
    if (kind !== 'turn.queued' || !turnId || agent.starting || rtLive()) return false;
    agentSetRuntimeTurn({ turn_id: turnId, status: 'QUEUED' }, 0);
    agent.fetchRt = true;
  }
  const seq = Number(ev.seq);
  if (agent.rtSeen.has(seq)) return false;
  agent.rtSeen.add(seq);
  const detail = String(ev.detail ?? '');
  pushActivity({ source: 'runtime', type: kind, sequence: seq, timestamp: String(ev.at ?? ''), detail });
  if (kind === 'turn.resume_refused') agent.resumeRefused = detail;
  return true;
}

// Applies one gateway event to the gateway turn the current runtime turn
// drives (others are not ours). Returns true when something shown changed.
function agentIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  if (!agent.turn || turnId !== agent.turn.turn_id) return false;
  const seq = Number(ev.sequence);
  if (agent.seen.has(seq)) return false;
  agent.seen.add(seq);
  pushActivity({ ...ev, source: 'gateway' });
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  const turn = agent.turn;
  switch (ev.type) {
    case 'agent.plan.updated':
      agent.plan = { steps: Array.isArray(p.steps) ? p.steps.map((x) => String(x)) : [], done: Number(p.done ?? 0) };
      break;
    case 'agent.tool.completed':
      agent.cards.push({
        sequence: seq,
        tool_id: String(p.tool_id ?? ''),
        status: String(p.status ?? ''),
        result_id: p.result_id ? String(p.result_id) : null,
        observations: Array.isArray(p.observations) ? p.observations.map((x) => String(x)) : [],
        diagnostic: p.diagnostic === null || p.diagnostic === undefined ? null : String(p.diagnostic),
        refs: Array.isArray(ev.refs) ? ev.refs : [],
      });
      break;
    case 'agent.authorization.required':
      turn.status = 'AUTHORIZATION_REQUIRED';
      if (p.research_request) turn.research_request = String(p.research_request);
      if (p.risk_level) agent.riskHint = String(p.risk_level);
      break;
    case 'agent.turn.completed':
      turn.status = 'COMPLETED';
      turn.summary = String(p.summary ?? '');
      turn.summary_refs = Array.isArray(ev.refs) ? ev.refs : [];
      break;
    case 'agent.error':
      turn.status = 'FAILED';
      turn.error = String(p.message ?? '');
      break;
    default:
      break;
  }
  return true;
}

// ----- polling (no SSE: the runtime's and the gateway's event logs are
// polled while a turn is live)

// `data-polling` on the panel: true while a poll is scheduled or running.
function setPollingAttr() {
  $('agent-panel').dataset.polling = String(Boolean(agent.timer) || agent.polling);
}

function agentSchedule() {
  if (!agent.timer && !agent.polling && !agent.pollError) {
    if (rtLive()) {
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    } else if (agent.afterPolls > 0) {
      agent.afterPolls -= 1;
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    }
  }
  setPollingAttr();
}

function agentKick() {
  if (agent.timer) {
    clearTimeout(agent.timer);
    agent.timer = null;
  }
  agent.pollError = null;
  agent.afterPolls = AGENT_AFTER_ACTION_POLLS;
  if (!agent.polling) agentPoll();
}

// One poll: the runtime turn (while it moves), the runtime's events, then
// the events of the gateway turn it drives — in this order, so that the
// events shown are at least as new as the turn's state. Everything is read
// first and applied at once: a turn shown paused or completed already has
// its events, plan and tool cards.
async function agentPoll() {
  agent.timer = null;
  if (agent.polling) return;
  agent.polling = true;
  setPollingAttr();
  const gen = agent.gen;
  const rev = agent.rev;
  const rt = agent.rt;
  let rtPage;
  let fresh = null;
  let lost = false;
  let gwPage = null;
  let bind = null;
  let gwCursor = agent.cursor;
  let late = false;
  const readTurn = async () => {
    try {
      return await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}`);
    } catch (err) {
      // Evicted (the runtime keeps a bounded number of turns): the last
      // state read stays shown, and the turn is no longer followed.
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      lost = true;
      return null;
    }
  };
  try {
    const follow = Boolean(rt) && !rt.lost;
    if (follow && (agent.fetchRt || RT_BUSY.has(rt.status))) fresh = await readTurn();
    rtPage = await api(`/api/v1/agent-runtime/events?cursor=${agent.rtCursor}&limit=${RT_EVENTS_PAGE}`);
    const rtEvents = Array.isArray(rtPage.events) ? rtPage.events : [];
    if (follow && !fresh && !lost
      && (rtPage.missed || rtEvents.some((e) => e && String(e.turn_id ?? '') === rt.turn_id))) {
      // A paused or ended turn moved (resumed elsewhere): its state may be
      // newer than these events, so one more poll follows.
      fresh = await readTurn();
      late = true;
    }
    const gw = (fresh ?? rt)?.gateway_turn_id;
    if (gw && !lost) {
      if (!agent.turn || agent.turn.turn_id !== String(gw)) {
        bind = String(gw);
        gwCursor = Math.min(agent.cursor, agent.gwFrom);
      }
      gwPage = await api(`/api/v1/agent-tools/events?cursor=${gwCursor}`);
    }
  } catch (err) {
    agent.polling = false;
    // Stop on any error (a lost session, a server restart): no retry loop
    // behind the analyst's back; the panel says so and offers to resume.
    agent.pollError = err;
    agent.afterPolls = 0;
    setPollingAttr();
    renderAgentError();
    return;
  }
  agent.polling = false;
  if (gen !== agent.gen || rev !== agent.rev) {
    // The current turn changed while this poll ran (another turn, or a
    // cancel or resume answered meanwhile): it is read again from the
    // right cursors.
    agentSchedule();
    return;
  }
  const wasBusy = Boolean(rt) && RT_BUSY.has(rt.status);
  let changed = false;
  for (const ev of Array.isArray(rtPage.events) ? rtPage.events : []) changed = rtIngest(ev) || changed;
  const rtNext = Number(rtPage.next_cursor);
  if (Number.isSafeInteger(rtNext) && rtNext >= 0) agent.rtCursor = rtNext;
  if (rtPage.missed && !agent.missed) {
    agent.missed = true;
    changed = true;
  }
  if (agent.rt !== rt) {
    // A turn started elsewhere became the current one: read it at once.
    agent.afterPolls = Math.max(agent.afterPolls, 1);
  } else if (rt) {
    if (fresh) {
      Object.assign(rt, fresh, { turn_id: rt.turn_id });
      agent.fetchRt = false;
      changed = true;
    }
    if (late) agent.afterPolls = Math.max(agent.afterPolls, 1);
    if (lost) {
      rt.lost = true;
      agent.formNote = { kind: 'error', text: () => t('agent_turn_lost') };
      changed = true;
    }
    if (bind) {
      agent.turn = { turn_id: bind, status: 'RUNNING' };
      agent.seen = new Set();
      changed = true;
    }
    if (gwPage) {
      for (const ev of Array.isArray(gwPage.events) ? gwPage.events : []) changed = agentIngest(ev) || changed;
      const next = Number(gwPage.next_cursor);
      if (Number.isSafeInteger(next) && next >= 0) agent.cursor = next;
      if (gwPage.missed && !agent.missed) {
        agent.missed = true;
        changed = true;
      }
    }
    if (wasBusy && !RT_BUSY.has(rt.status)) agentSettled(rt);
  }
  if (changed) renderAgent();
  const cur = agent.rt;
  if (cur && cur.research_request && cur.status === 'AUTHORIZATION_REQUIRED'
    && (!agent.review || agent.review.id !== String(cur.research_request))) {
    loadReview();
  }
  agentSchedule();
}

// The runtime turn left QUEUED/RUNNING (paused, completed or ended).
function agentSettled(rt) {
  if (agent.resumed) {
    agent.resumed = false;
    const status = String(rt.status ?? '');
    if (status === 'AUTHORIZATION_REQUIRED' && agent.resumeRefused !== null) {
      const message = agent.resumeRefused;
      reviewNote('error', () => t('agent_resume_refused', { message }));
    } else {
      reviewNote('ok', () => t('agent_resumed', { status: enumLabel('turn', status) }));
    }
    loadReview(true);
    // New evidence (a synthetic campaign's pages) shows in the overview.
    const { name } = parseHash();
    if (name === '' || name === 'overview') route();
  }
  // A turn that could not reach the model: the mode line says why.
  if (rt.status === 'MODEL_UNAVAILABLE') agentLoadStatus();
}

// ----- actions

// Starts a runtime turn (M6). The idempotency key is fresh for each
// submission and kept until the server answers it: a second submission
// meanwhile is ignored, and a retry of the same question after no answer
// (network, timeout, 5xx) reuses it, so it cannot start a second turn.
async function agentStart(ev) {
  ev.preventDefault();
  if (agent.starting) return undefined;
  const question = $('agent-question').value.trim();
  const exclusions = String($('agent-exclusions').value).split('\n').map((x) => x.trim()).filter(Boolean);
  const say = (key, kind, vars) => {
    agent.formNote = { kind, text: () => t(key, vars) };
    renderAgentForm();
  };
  if (!question) return say('agent_question_missing', 'error');
  if (Array.from(question).length > AGENT_QUESTION_MAX) return say('agent_question_too_long', 'error', { n: AGENT_QUESTION_MAX });
  if (exclusions.length > AGENT_EXCLUSIONS_MAX) return say('agent_exclusions_too_many', 'error', { n: AGENT_EXCLUSIONS_MAX });
  // The analyst's language: the demo agent plans and sums up in it (SPEC U4).
  const body = { question, exclusions, lang };
  if (state.investigationId) body.investigation_id = state.investigationId;
  // Read only (a local model's turn): the catalog's read tools, nothing
  // that prepares, proposes or reaches out (SPEC M: the turn's `tools`).
  if (localModel() && $('agent-readonly').checked) {
    const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
    const read = tools.filter((x) => x && ['read', 'meta'].includes(x.action_class)).map((x) => String(x.tool_id));
    if (read.length === 0) return say('agent_readonly_no_catalog', 'error');
    body.tools = read;
  }
  const sig = JSON.stringify(body);
  if (!agent.startKey || agent.startKey.sig !== sig) agent.startKey = { key: newIdempotencyKey(), sig };
  body.idempotency_key = agent.startKey.key;
  const run = $('agent-run');
  run.disabled = true;
  agent.starting = true;
  agent.gen += 1; // drop whatever a poll in flight brings back
  const gwFrom = agent.cursor; // this turn's gateway events come after it
  say('agent_running', 'info');
  let turn = null;
  try {
    turn = await api('/api/v1/agent-runtime/turns', { method: 'POST', body });
    agent.startKey = null;
  } catch (err) {
    // A refusal is an answer (nothing started): the next submission gets a
    // new key. Without an answer the key stays for a retry.
    if (err instanceof ApiError && err.status < 500) agent.startKey = null;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  } finally {
    agent.starting = false;
    run.disabled = false;
  }
  if (turn) {
    agentSetRuntimeTurn(turn, gwFrom);
    const status = String(turn.status ?? '');
    // The note follows the turn: it reads its current status at each render.
    agent.formNote = {
      kind: 'ok',
      text: () => t('agent_started', { status: enumLabel('turn', String(agent.rt?.status ?? status)) }),
    };
  }
  renderAgent();
  agentKick();
  return undefined;
}

// Cancels the current runtime turn (M8): a queued turn never runs, a
// running one has every later effect blocked.
async function agentCancel() {
  const rt = agent.rt;
  if (!rt || agent.cancel === 'pending') return;
  const gen = agent.gen;
  agent.cancel = 'pending';
  agent.rev += 1;
  agent.formNote = { kind: 'info', text: () => t('agent_cancelling') };
  renderAgent();
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/cancel`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.cancel = 'done';
    agent.formNote = { kind: 'ok', text: () => t('agent_cancelled') };
  } catch (err) {
    if (gen !== agent.gen) return;
    agent.rev += 1;
    // Already ended (409), or no answer: the next poll says where it stands.
    agent.cancel = 'error';
    agent.fetchRt = true;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  }
  renderAgent();
  agentKick();
}

function resetGrantForm() {
  $('agent-grant-form').reset();
  $('agent-refuse-form').reset();
}

// The grant form starts from the addresses research.prepare proposed (SPEC
// F1), once per request: the human edits them; only the final list is sent.
function prefillGrant(r) {
  const c = r && r.candidates && typeof r.candidates === 'object' ? r.candidates : null;
  if (!c) return;
  const urls = (Array.isArray(c.urls) ? c.urls : []).map((u) => String(u && u.url ? u.url : '')).filter(Boolean);
  const hosts = (Array.isArray(c.hosts) ? c.hosts : []).map(String).filter(Boolean);
  if (hosts.length) $('agent-grant-hosts').value = hosts.slice(0, GRANT_HOSTS_MAX).join('\n');
  if (urls.length) {
    $('agent-grant-urls').value = urls.slice(0, GRANT_URLS_MAX).join('\n');
    const requests = $('agent-grant-requests');
    if (Number(requests.value) < urls.length) requests.value = String(Math.min(urls.length, GRANT_URLS_MAX));
  }
}

// A link to an object named by its title or name (the reference stays in
// its data and tooltip, not in the text).
function labelLink(ref, label, testid) {
  const s = String(ref ?? '');
  const kind = refKind(s);
  const text = String(label || s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, title: s, dataset: { ref: s, kind }, text });
  }
  return h('span', { testid, title: s, text });
}

// Why an address is proposed, in words, with the object it came through.
function candidateWhy(u) {
  const origin = String(u.origin ?? '');
  const why = t(`cand_${origin}`, { relation: u.relation ? enumLabel('rel', u.relation) : '' });
  return [h('span', { class: 'muted', text: t('cand_why', { why }) }), labelLink(u.via ?? u.selected, u.label, 'agent-candidate-source')];
}

function skipWhy(s) {
  const reason = String(s.reason ?? '');
  let detail = String(s.detail ?? '');
  if (reason === 'private_address') detail = t(`addr_${detail}`);
  if (reason === 'onion') detail = t(`onion_${detail}`);
  return t(`skip_${reason}`, { detail });
}

// What research.prepare proposed (SPEC F1): each address with why, then
// what it left out and why.
function candidatesEl(c, pending) {
  const urls = Array.isArray(c.urls) ? c.urls : [];
  const skipped = Array.isArray(c.skipped) ? c.skipped : [];
  const box = h('div', { class: 'candidates', testid: 'agent-candidates', dataset: { count: String(urls.length) } });
  if (urls.length === 0) {
    box.append(h('p', { class: 'muted', testid: 'agent-candidates-none', text: t('candidates_none') }));
  } else {
    if (pending) box.append(h('p', { class: 'muted small', text: t('candidates_help') }));
    box.append(h('ul', { class: 'candidate-list' }, urls.map((u) => h('li',
      { testid: 'agent-candidate', dataset: { url: String(u.url ?? ''), origin: String(u.origin ?? '') } },
      h('code', { class: 'candidate-url', text: String(u.url ?? '') }),
      u.host_unicode ? h('span', { class: 'muted small', text: ` (${u.host_unicode})` }) : null,
      h('div', { class: 'candidate-why small' }, candidateWhy(u))))));
    const more = Number(c.more ?? 0);
    if (more > 0) box.append(h('p', { class: 'muted small', testid: 'agent-candidates-more', text: tn('candidates_more', more) }));
  }
  if (skipped.length) {
    const total = Math.max(Number(c.skipped_total ?? 0), skipped.length);
    box.append(h('details', { class: 'candidate-skipped', testid: 'agent-candidates-skipped' },
      h('summary', { text: tn('candidates_skipped', total) }),
      h('ul', null, skipped.map((x) => h('li', { testid: 'agent-candidate-skipped', dataset: { reason: String(x.reason ?? '') } },
        h('code', { class: 'candidate-url', text: String(x.value ?? '') }),
        h('div', { class: 'muted small', text: skipWhy(x) }))))));
  }
  return box;
}

async function loadReview(force = false) {
  const rt = agent.rt;
  const id = rt && rt.research_request ? String(rt.research_request) : null;
  if (!id) return;
  const fresh = !agent.review || agent.review.id !== id;
  if (!fresh && agent.review.loading) return;
  if (!fresh && !force) return;
  if (fresh) resetGrantForm();
  campaignStop();
  const before = fresh ? '' : campaignStatus(agent.review.request);
  const decided = !fresh && agent.review.request && agent.review.request.status !== 'PENDING';
  agent.review = { ...(fresh ? {} : agent.review), id, loading: true, error: null };
  renderReview();
  const gen = agent.gen;
  try {
    let request = null;
    let fingerprint = agent.review.fingerprint ?? null;
    let risk = agent.review.risk ?? agent.riskHint;
    if (!decided) {
      const list = await api('/api/v1/research/requests');
      request = (Array.isArray(list.requests) ? list.requests : []).find((r) => r && r.id === id) ?? null;
      fingerprint = list.current_contract_fingerprint ?? null;
      risk = list.risk_level ?? risk;
    }
    if (!request) {
      // No longer pending: read it on its own (granted, refused or void),
      // with its campaign's progress.
      const one = await api(`/api/v1/research/requests/${seg(id)}`);
      request = one.request ?? null;
      fingerprint = one.current_contract_fingerprint ?? fingerprint;
    }
    // A REAL grant waiting for its confirmation (T2): where to confirm it,
    // as egress says (a fresh one-time link at each read).
    let confirmation = null;
    const grantId = request && request.grant ? String(request.grant.id ?? '') : '';
    // Past the confirmation: egress's own log of the grant's fetches (T2).
    let fetchLog = null;
    if (isRealWorkspace() && grantId && campaignStatus(request) === 'PENDING') {
      confirmation = await api(`/api/v1/grants/${seg(grantId)}/confirmation`).catch(() => null);
    } else if (isRealWorkspace() && grantId && campaignStatus(request)) {
      fetchLog = await api(`/api/v1/grants/${seg(grantId)}/fetch-log`).catch(() => null);
    }
    // The selection's titles (read once each; a failure leaves the id).
    if (request) await loadRefLabels(request.selection);
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, request, fingerprint, risk, confirmation, fetchLog });
    if (request && request.status === 'PENDING' && !agent.review.prefilled) {
      prefillGrant(request);
      agent.review.prefilled = true;
    }
    if (agent.review.noteUntilConfirmed && campaignStatus(request) && campaignStatus(request) !== 'PENDING') {
      Object.assign(agent.review, { note: null, noteUntilConfirmed: false });
    }
  } catch (err) {
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, error: err });
  }
  renderReview();
  const after = campaignStatus(agent.review.request);
  if (CAMPAIGN_LIVE.has(before) && after && !CAMPAIGN_LIVE.has(after)) {
    // The campaign ended: its pages are evidence now.
    const { name } = parseHash();
    if (name === '' || name === 'overview') route();
  }
  campaignSchedule();
}

// The status of a request's campaign, or ''.
function campaignStatus(request) {
  const c = request && typeof request === 'object' ? request.campaign : null;
  return c && typeof c === 'object' ? String(c.status ?? '') : '';
}

// A campaign that has not ended is read again (while the page is visible
// and the last read succeeded): its progress bar and items follow it.
function campaignSchedule() {
  const rv = agent.review;
  if (agent.campaignTimer || !rv || rv.error || rv.loading || document.hidden) return;
  if (!CAMPAIGN_LIVE.has(campaignStatus(rv.request))) return;
  agent.campaignTimer = setTimeout(() => {
    agent.campaignTimer = null;
    loadReview(true);
  }, CAMPAIGN_POLL_MS);
}

function campaignStop() {
  if (agent.campaignTimer) {
    clearTimeout(agent.campaignTimer);
    agent.campaignTimer = null;
  }
}

function reviewNote(kind, text) {
  if (agent.review) agent.review.note = { kind, text };
  noteEl($('agent-review-status'), agent.review ? agent.review.note : null);
}

function positiveInt(el, labelKey) {
  const raw = String(el.value ?? '').trim();
  if (!/^[0-9]{1,10}$/.test(raw) || Number(raw) < 1) {
    reviewNote('error', () => t('agent_grant_number', { field: t(labelKey) }));
    return null;
  }
  return Number(raw);
}

async function agentGrant(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const hosts = String($('agent-grant-hosts').value).split('\n').map((x) => x.trim()).filter(Boolean);
  if (hosts.length === 0) return reviewNote('error', () => t('agent_grant_hosts_missing'));
  if (hosts.length > GRANT_HOSTS_MAX) return reviewNote('error', () => t('agent_grant_hosts_too_many', { n: GRANT_HOSTS_MAX }));
  const maxRequests = positiveInt($('agent-grant-requests'), 'agent_grant_requests');
  if (maxRequests === null) return undefined;
  const maxBytes = positiveInt($('agent-grant-bytes'), 'agent_grant_bytes');
  if (maxBytes === null) return undefined;
  const minutes = positiveInt($('agent-grant-minutes'), 'agent_grant_minutes');
  if (minutes === null) return undefined;
  const body = { scope: { hosts }, budget: { max_requests: maxRequests, max_bytes: maxBytes }, expires_in_minutes: minutes };
  if (isRealWorkspace()) {
    // REAL: the exact addresses the campaign fetches (the server checks
    // each against the scope; nothing else is ever fetched).
    const urls = lines($('agent-grant-urls').value, GRANT_URLS_MAX + 1);
    if (urls.length === 0) return reviewNote('error', () => t('agent_grant_urls_missing'));
    if (urls.length > GRANT_URLS_MAX) return reviewNote('error', () => t('agent_grant_urls_too_many', { n: GRANT_URLS_MAX }));
    body.urls = urls;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_granting'));
  try {
    const out = await api(`/api/v1/research/requests/${seg(r.id)}/grant`, { method: 'POST', body });
    const grant = String(out.grant ?? '');
    const campaign = String(out.campaign ?? '');
    // REAL: a proposal until a human confirms it outside the server (T2).
    const key = out.confirmation ? 'agent_granted_confirm' : 'agent_granted';
    reviewNote('ok', () => t(key, { grant, campaign }));
    // « Confirmez-la » holds only until the confirmation (see loadReview).
    if (out.confirmation && agent.review) agent.review.noteUntilConfirmed = true;
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
  return undefined;
}

async function agentRefuse(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const reason = String($('agent-refuse-reason').value).trim();
  if (!reason) {
    reviewNote('error', () => t('agent_refuse_missing'));
    return;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_refusing'));
  try {
    await api(`/api/v1/research/requests/${seg(r.id)}/refuse`, { method: 'POST', body: { reason } });
    reviewNote('ok', () => t('agent_refused'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Resumes the paused runtime turn (M8) once the request is decided: the
// runtime queues it, the gateway checks the grant and rereads the research
// state; polling follows it to its summary.
async function agentResume() {
  const rt = agent.rt;
  if (!rt) return;
  setReviewBusy(true);
  reviewNote('info', () => t('agent_resuming'));
  const gen = agent.gen;
  agent.rev += 1;
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/resume`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.resumed = true;
    agent.resumeRefused = null;
    const status = String(updated.status ?? '');
    reviewNote('info', () => t('agent_resume_queued', { status: enumLabel('turn', status) }));
    renderAgent();
    agentKick();
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Revokes the request's grant: the store stops its campaign, the server
// tells egress; the review is read again.
async function agentRevoke() {
  const r = agent.review && agent.review.request;
  const grant = r && r.grant ? String(r.grant.id ?? '') : '';
  if (!grant) return;
  setReviewBusy(true);
  reviewNote('info', () => t('agent_revoking'));
  try {
    await api(`/api/v1/grants/${seg(grant)}/revoke`, { method: 'POST', body: {} });
    reviewNote('ok', () => t('agent_revoked'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

function setReviewBusy(busy) {
  for (const id of ['agent-grant', 'agent-refuse', 'agent-resume', 'agent-revoke']) $(id).disabled = busy;
  $('agent-review').dataset.busy = String(busy);
}

async function toggleResult(card) {
  const id = card.result_id;
  if (!id) return;
  let entry = agent.results.get(id);
  if (entry && entry.open) {
    entry.open = false;
    renderCards();
    return;
  }
  if (!entry) {
    entry = { open: true, loading: true, data: null, error: null };
    agent.results.set(id, entry);
  }
  entry.open = true;
  renderCards();
  if (entry.data) return;
  entry.loading = true;
  try {
    entry.data = await api(`/api/v1/agent-tools/results/${seg(id)}`);
    entry.error = null;
  } catch (err) {
    entry.error = err;
  }
  entry.loading = false;
  renderCards();
}

// ----- rendering

function renderAgent() {
  const panel = $('agent-panel');
  const rt = agent.rt;
  panel.dataset.turnId = rt ? String(rt.turn_id ?? '') : '';
  panel.dataset.turnStatus = rt ? String(rt.status ?? '') : '';
  panel.dataset.gatewayTurnId = agent.turn ? String(agent.turn.turn_id ?? '') : '';
  panel.dataset.cancel = agent.cancel;
  // The same status on the panel and on the top bar's button, which also
  // says when the agent waits for the analyst (the drawer may be closed).
  for (const pill of [$('agent-turn-status'), $('agent-toggle-status')]) {
    if (rt && rt.status) {
      pill.textContent = enumLabel('turn', rt.status);
      pill.className = `pill status-${cssToken(rt.status)}`;
      pill.dataset.status = String(rt.status);
      pill.hidden = false;
    } else {
      pill.hidden = true;
    }
  }
  const waiting = Boolean(rt && rt.status === 'AUTHORIZATION_REQUIRED');
  $('agent-toggle').dataset.attention = String(waiting);
  if (waiting) $('agent-toggle').title = t('agent_needs_you');
  else $('agent-toggle').removeAttribute('title');
  renderAgentMode();
  renderAgentTools();
  renderAgentForm();
  renderAgentError();
  renderSummary();
  renderReview();
  renderPlan();
  renderCards();
  renderActivity();
}

// The mode line (M10) says which agent the runtime drives, as its status
// says: the demo agent, the local model, or why the local model cannot run
// now. Nothing here falls back to the demo agent's name.
function renderAgentMode() {
  const el = $('agent-mode');
  const st = agent.status;
  if (agent.statusError) {
    el.textContent = t('agent_unavailable', { message: errorText(agent.statusError) });
    el.dataset.mode = 'unavailable';
    el.dataset.ready = 'false';
    return;
  }
  if (!st) {
    el.textContent = t('loading');
    el.dataset.mode = '';
    el.dataset.ready = '';
    return;
  }
  const driver = String(st.driver ?? '');
  const label = String(st.label ?? '');
  const detail = st.detail === null || st.detail === undefined ? '' : String(st.detail);
  let text = driver === 'demo' ? t('agent_demo') : (label || driver);
  if (detail) text = t('agent_mode_detail', { label: text, detail });
  if (st.closed) text = t('agent_mode_closed', { label: text });
  el.textContent = shown(text);
  el.dataset.mode = driver;
  el.dataset.ready = String(st.ready === true);
}

function renderAgentTools() {
  const list = clear($('agent-tools'));
  const summary = $('agent-tools-summary');
  const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
  if (tools.length === 0) {
    summary.textContent = agent.catalogError ? t('agent_mode_detail', { label: t('agent_tools'), detail: errorText(agent.catalogError) }) : t('agent_tools');
    return;
  }
  const unavailable = tools.filter((x) => x && x.availability && x.availability.status !== 'AVAILABLE').length;
  summary.textContent = t('agent_tools_count', { n: fmtNumber(tools.length), u: fmtNumber(unavailable) });
  for (const tool of tools) {
    const av = tool.availability || {};
    const status = String(av.status ?? '');
    const reason = av.reason === null || av.reason === undefined ? '' : String(av.reason);
    list.append(h('li', { class: 'agent-tool', testid: 'agent-tool', dataset: { tool: String(tool.tool_id ?? ''), availability: status, risk: String(tool.risk_level ?? '') } },
      h('code', { class: 'agent-tool-id', text: tool.tool_id ?? '?' }),
      riskPill(tool.risk_level, 'agent-tool-risk'),
      h('span', { class: `pill avail-${cssToken(status)}`, testid: 'agent-tool-availability', text: enumLabel('agent_tool', status) }),
      reason ? h('span', { class: status === 'AVAILABLE' ? 'muted small' : 'small agent-tool-reason', testid: 'agent-tool-reason', text: reason }) : null));
  }
}

// Whether the runtime drives a local model (only its turns take `tools`).
function localModel() {
  return agent.status?.driver === 'local_model';
}

function renderAgentForm() {
  const q = $('agent-question');
  $('agent-readonly-row').hidden = !localModel();
  $('agent-question-count').textContent = t('agent_question_count', { n: fmtNumber(Array.from(q.value).length), max: fmtNumber(AGENT_QUESTION_MAX) });
  noteEl($('agent-form-status'), agent.formNote);
  const cancel = $('agent-cancel');
  cancel.hidden = !rtBusy();
  cancel.disabled = agent.cancel === 'pending';
  const counters = $('agent-turn-counters');
  const rt = agent.rt;
  if (!rt) {
    counters.textContent = '';
    counters.hidden = true;
    return;
  }
  const n = (x) => (Number.isSafeInteger(Number(x)) ? Number(x) : 0);
  const rounds = n(rt.rounds);
  const calls = n(rt.tool_calls);
  const repairs = n(rt.repairs);
  const line = t('agent_counters', { rounds: fmtNumber(rounds), calls: fmtNumber(calls), repairs: fmtNumber(repairs) });
  counters.textContent = rt.driver === 'local_model' && rt.model ? `${t('agent_local', { model: String(rt.model) })} — ${line}` : line;
  Object.assign(counters.dataset, { rounds: String(rounds), toolCalls: String(calls), repairs: String(repairs), driver: String(rt.driver ?? '') });
  counters.hidden = false;
}

function renderAgentError() {
  const box = clear($('agent-error'));
  if (!agent.pollError) {
    box.hidden = true;
    return;
  }
  const retry = h('button', { type: 'button', class: 'more', testid: 'agent-poll-retry', text: t('agent_poll_retry') });
  retry.addEventListener('click', () => agentKick());
  box.append(h('p', { text: t('agent_poll_stopped', { message: errorText(agent.pollError) }) }), retry);
  box.hidden = false;
}

// The runtime turn's summary once COMPLETED, or one short sentence with its
// error when it ended otherwise.
function renderSummary() {
  const box = $('agent-summary-box');
  const text = $('agent-summary');
  const refs = clear($('agent-summary-refs'));
  const rt = agent.rt;
  const status = rt ? String(rt.status ?? '') : '';
  if (status === 'COMPLETED' && rt.summary) {
    text.textContent = shown(rt.summary);
    text.dataset.status = status;
    text.className = 'agent-summary';
    for (const r of Array.isArray(rt.summary_refs) ? rt.summary_refs : []) refs.append(h('li', null, refLink(r, 'agent-summary-ref')));
    box.dataset.status = status;
    box.hidden = false;
  } else if (RT_END_ERRORS.has(status)) {
    text.textContent = t(`agent_end_${status}`, { message: runtimeDetail(String(rt.error ?? '')) });
    text.dataset.status = status;
    text.className = 'agent-summary error-box';
    box.dataset.status = status;
    box.hidden = false;
  } else {
    text.textContent = '';
    text.dataset.status = '';
    box.dataset.status = '';
    box.hidden = true;
  }
}

function renderReview() {
  const box = $('agent-review');
  const details = clear($('agent-review-details'));
  const rv = agent.review;
  const rt = agent.rt;
  // A cancelled turn cannot resume: its request is not offered here.
  if (!rv || !rt || rv.id !== String(rt.research_request ?? '') || rt.status === 'CANCELLED') {
    box.hidden = true;
    box.dataset.requestId = '';
    box.dataset.requestStatus = '';
    return;
  }
  box.hidden = false;
  box.dataset.requestId = rv.id;
  const r = rv.request;
  const pending = Boolean(r) && r.status === 'PENDING';
  box.dataset.requestStatus = r ? String(r.status ?? '') : '';
  $('agent-grant-form').hidden = !pending;
  $('agent-grant-urls-box').hidden = !(pending && isRealWorkspace());
  $('agent-refuse-form').hidden = !pending;
  // A campaign that has not ended is waited for: the resumed turn reads its
  // outcome (the pages fetched), not a campaign half done.
  const waiting = Boolean(r) && CAMPAIGN_LIVE.has(campaignStatus(r));
  // A revoked or expired grant cannot resume the turn (M8): cancel it instead.
  const lapsed = Boolean(r) && r.status === 'GRANTED' && r.grant_active === false;
  const resumable = r && !pending && !lapsed && rt.status === 'AUTHORIZATION_REQUIRED' && !rt.lost;
  $('agent-resume').hidden = !(resumable && !waiting);
  // An active grant can be revoked at any time (SPEC E3, W4): its campaign
  // stops at once.
  $('agent-revoke').hidden = !(r && r.status === 'GRANTED' && r.grant_active === true && r.grant && r.grant.id);
  box.dataset.campaignStatus = r ? campaignStatus(r) : '';
  noteEl($('agent-review-status'), rv.note ?? null);
  if (rv.loading && !r) {
    details.append(h('p', { class: 'muted', text: t('agent_review_loading') }));
    return;
  }
  if (rv.error) details.append(h('p', { class: 'error-box', testid: 'agent-review-error', text: errorText(rv.error) }));
  if (!r) return;
  const exclusions = Array.isArray(r.exclusions) ? r.exclusions : [];
  const stale = rv.fingerprint && r.contract_fingerprint && rv.fingerprint !== r.contract_fingerprint;
  const c = r.campaign && typeof r.campaign === 'object' ? r.campaign : null;
  const rows = [
    [t('agent_review_status'), statusPill('req', r.status, 'agent-review-request-status'), 'agent-review-status-row'],
    [t('agent_review_question'), h('span', { class: 'agent-question-text', text: r.question ?? '' }), 'agent-review-question'],
    [t('agent_review_selection'), selectionList(r.selection, 'agent-review-selection'), 'agent-review-selection-row'],
    [t('agent_review_exclusions'), exclusions.length
      ? h('ul', { class: 'agent-exclusion-list' }, exclusions.map((x) => h('li', { text: x })))
      : h('span', { class: 'muted', text: t('agent_review_none') }), 'agent-review-exclusions'],
  ];
  if (r.candidates && typeof r.candidates === 'object') {
    rows.push([t('agent_review_candidates'), candidatesEl(r.candidates, pending), 'agent-review-candidates-row']);
  }
  rows.push(
    // What granting does: fetch pages through Tor — outbound and observable
    // by the sites asked (SPEC R6), whatever the preparing tool declared.
    [t('agent_review_outbound_risk'), h('span', null,
      riskPill('high', 'agent-review-outbound-risk', t('agent_review_outbound_title')), ' ',
      h('span', { class: 'muted small', text: t('agent_review_outbound_why') })), 'agent-review-outbound-row'],
    [t('agent_review_risk'), riskPill(rv.risk ?? agent.riskHint, 'agent-review-risk'), 'agent-review-risk-row'],
    [t('agent_review_requested_by'), h('span', { text: r.requested_by ?? '' }), 'agent-review-requested-by'],
    [t('agent_review_created'), timeEl(r.created_at), 'agent-review-created'],
  );
  if (stale) rows.push([t('agent_review_fingerprint'), h('span', { class: 'error-box agent-stale', testid: 'agent-review-stale', text: t('agent_review_fingerprint_stale') }), 'agent-review-stale-row']);
  if (r.decision_note) rows.push([t('agent_review_note'), h('span', { text: r.decision_note }), 'agent-review-decision-note']);
  const confirming = Boolean(rv.confirmation) && Boolean(c) && campaignStatus(r) === 'PENDING';
  if (c) rows.push([t('agent_review_campaign'), renderCampaign(c, { confirming: confirming && rv.confirmation.phase === 'PROPOSED' }), 'agent-review-campaign-row']);
  if (confirming) details.append(confirmBox(rv.confirmation));
  details.append(dl(rows, 'agent-review-meta'));
  // The references an audit needs, out of the way (SPEC U5: the screen
  // speaks in titles).
  details.append(h('details', { class: 'agent-tech', testid: 'agent-review-tech' },
    h('summary', { text: t('agent_review_tech') }),
    dl([
      [t('agent_review_id'), h('code', { class: 'hash', text: r.id ?? rv.id }), 'agent-review-id'],
      [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint, 'agent-review-fingerprint'), 'agent-review-fingerprint-row'],
    ])));
  if (rv.fetchLog && c && !confirming) details.append(fetchLogBox(rv.fetchLog));
  if (resumable && waiting) details.append(h('p', { class: 'muted small', testid: 'agent-resume-wait', text: t('agent_resume_after_campaign') }));
}

// Where a REAL grant is confirmed (SPEC T2): egress's page on its own
// loopback port (a link, opened in a new tab), or the terminal. The server
// only relays what egress says; it cannot confirm anything itself.
function confirmBox(cf) {
  const box = h('div', { class: 'confirm-box', testid: 'grant-confirmation', 'data-phase': String(cf.phase ?? '') },
    h('p', { class: 'confirm-title', text: t('confirm_title') }),
    h('p', { class: 'small', text: t('confirm_why') }));
  const link = String(cf.confirm_url ?? '');
  if (/^http:\/\/(127\.0\.0\.1|localhost):[0-9]{1,5}\//.test(link)) {
    box.append(h('a', { class: 'button primary confirm-link', href: link, target: '_blank', rel: 'noopener noreferrer',
      testid: 'grant-confirm-link', text: t('confirm_open') }));
  }
  if (cf.available === false) box.append(h('p', { class: 'error-box', testid: 'grant-confirm-unavailable', text: t('confirm_unavailable') }));
  box.append(h('p', { class: 'small confirm-terminal' }, t('confirm_terminal'), ' ',
    h('code', { testid: 'grant-confirm-command', text: String(cf.command ?? '') })));
  return box;
}

// Egress's append-only log of a grant's fetches (T2), as egress keeps it:
// every request, refusals included, newest last.
function fetchLogBox(log) {
  if (log.available === false) {
    return h('p', { class: 'muted small', testid: 'egress-fetch-log-unavailable', text: t('flog_unavailable', { detail: String(log.detail ?? '') }) });
  }
  const entries = Array.isArray(log.entries) ? log.entries : [];
  const rows = entries.map((e) => h('tr', { testid: 'egress-fetch-log-entry', dataset: { status: String(e.status ?? '') } },
    h('td', null, timeEl(e.at)),
    h('td', null, h('code', { class: 'camp-url', text: String(e.url ?? '') }),
      e.reason ? h('span', { class: 'camp-reason small', text: String(e.reason) }) : null),
    h('td', null, statusPill('item', e.status, 'egress-fetch-log-status')),
    h('td', { class: 'num', text: e.http_status ? String(e.http_status) : t('res_none') }),
    h('td', { class: 'num', text: fmtNumber(countOf(e.bytes)) })));
  return h('details', { class: 'flog', testid: 'egress-fetch-log', dataset: { count: String(entries.length) } },
    h('summary', { class: 'small', text: t('flog_title', { n: fmtNumber(entries.length) }) }),
    rows.length ? resTable('egress-fetch-log-table', ['flog_col_time', 'flog_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes'], rows, [3, 4]) : null);
}

function isRealWorkspace() {
  return Boolean(state.workspace) && String(state.workspace.class ?? '') === 'REAL';
}

function countOf(v) {
  const n = Number(v);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

// "durée 12 s": from the campaign's start to its end, or to now while it runs.
function campaignElapsed(c) {
  const start = Date.parse(String(c.started_at ?? ''));
  if (!Number.isFinite(start)) return t('camp_not_started');
  const endAt = c.finished_at ? Date.parse(String(c.finished_at)) : Date.now();
  const end = Number.isFinite(endAt) ? endAt : Date.now();
  return t('camp_elapsed', { s: fmtNumber(Math.max(0, Math.round((end - start) / 1000))) });
}

// The progress bar: fetched, failed, remaining, as shares of the items —
// an SVG built element by element (no inline style).
function campaignBar(done, failed, rest) {
  const total = done + failed + rest;
  const label = t('camp_progress_label', { done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest) });
  const bar = svgEl('svg', {
    class: 'camp-bar', viewBox: '0 0 100 6', preserveAspectRatio: 'none', role: 'img', 'aria-label': label,
    testid: 'campaign-bar', 'data-done': done, 'data-failed': failed, 'data-remaining': rest, 'data-total': total,
  }, svgEl('title', { text: label }));
  let x = 0;
  for (const [n, cls] of [[done, 'camp-bar-done'], [failed, 'camp-bar-failed'], [rest, 'camp-bar-rest']]) {
    if (n === 0) continue;
    const width = (100 * n) / total;
    bar.append(svgEl('rect', { x, y: 0, width, height: 6, class: cls }));
    x += width;
  }
  if (total === 0) bar.append(svgEl('rect', { x: 0, y: 0, width: 100, height: 6, class: 'camp-bar-rest' }));
  return bar;
}

// The campaign runner's detail lines (the store keeps them in English, as
// the agent reads them), worded in the UI's language when their shape is
// known; the stored line stays in the tooltip.
const CAMPAIGN_DETAILS = [
  [/^(\d+) of (\d+) pages fetched over Tor and stored as evidence, (\d+) not, (\d+) bytes$/,
    (m) => t('camp_detail_done', { done: fmtNumber(Number(m[1])), total: fmtNumber(Number(m[2])), failed: fmtNumber(Number(m[3])), bytes: fmtBytes(Number(m[4])) })],
  [/^no page fetched: every one of its (\d+) items failed or was refused$/, (m) => t('camp_detail_none', { n: fmtNumber(Number(m[1])) })],
  [/^grant revoked by (.+)$/, (m) => t('camp_detail_revoked', { who: m[1] })],
  [/^stopped by the resource governor: .*stopped under pressure after (\d+) samples/, (m) => t('camp_detail_pressure', { n: fmtNumber(Number(m[1])) })],
  [/^stopped by the resource governor: .*lease .* lapsed/, () => t('camp_detail_lapsed')],
  [/^stopped by the resource governor: /, () => t('camp_detail_governor')],
  [/^Tor unavailable: .*; nothing was fetched in clear$/, () => t('camp_detail_tor')],
  [/^refused by the governor: /, () => t('camp_detail_refused')],
  [/^synthetic campaign \(SPECIMEN\): (\d+) pages written, (\d+) over budget, no network$/,
    (m) => t('camp_detail_synthetic', { done: fmtNumber(Number(m[1])), over: fmtNumber(Number(m[2])) })],
  [/^synthetic campaign \(SPECIMEN\): no network$/, () => t('camp_detail_synthetic_admitted')],
];

function campaignDetail(raw) {
  // In either language, a sentence of the catalogue (SPEC U4); the
  // runner's own line in the tooltip.
  const known = CAMPAIGN_DETAILS.find(([re]) => re.test(raw)) ?? null;
  const text = known ? known[1](raw.match(known[0])) : raw;
  return h('p', { class: 'small muted camp-detail', testid: 'campaign-detail', title: known ? raw : null, dataset: { raw }, text });
}

// A campaign: its status, progress (bar, counts, bytes, time) and detail,
// then each address with its outcome and the evidence it became. URLs,
// reasons and details are text.
// `confirming`: a REAL campaign whose grant waits for the human's
// confirmation outside the server (T2): said so instead of « admission ».
function renderCampaign(c, { confirming = false } = {}) {
  const status = String(c.status ?? '');
  const total = countOf(c.items_total);
  const done = countOf(c.items_done);
  const failed = countOf(c.items_failed);
  const rest = Math.max(0, total - done - failed);
  const items = Array.isArray(c.items) ? c.items : [];
  const head = h('span', {
    class: 'camp-head', testid: 'agent-review-campaign',
    dataset: { status, done: String(done), failed: String(failed), total: String(total), synthetic: String(Boolean(c.synthetic)) },
  }, refLink(c.id), ' ', statusPill('camp', confirming ? 'CONFIRMING' : status, 'campaign-status'),
  c.synthetic ? h('span', { class: 'muted small', text: ` (${t('agent_review_synthetic')})` }) : null);
  const progress = h('p', {
    class: 'small camp-progress', testid: 'campaign-progress',
    text: t('camp_progress', {
      done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest), total: fmtNumber(total),
      bytes: fmtBytes(countOf(c.bytes)), elapsed: campaignElapsed(c),
    }),
  });
  const detail = c.detail && !confirming ? campaignDetail(String(c.detail)) : null;
  const rows = items.map((it) => {
    const st = String(it.status ?? '');
    const ev = it.evidence ? String(it.evidence) : '';
    // The address, with the outcome's reason under it (both text).
    const where = h('td', null, h('code', { class: 'camp-url', testid: 'campaign-item-url', text: String(it.url ?? '') }),
      it.reason ? h('span', { class: 'camp-reason small', testid: 'campaign-item-reason', text: String(it.reason) }) : null);
    // The evidence it became: a link that selects it in the reader.
    const link = ev
      ? h('a', { href: hrefFor(ev, 'evidence'), class: 'agent-ref', testid: 'campaign-item-evidence', title: ev, dataset: { ref: ev, kind: 'evidence' }, text: t('camp_open_evidence') })
      : t('res_none');
    return h('tr', { testid: 'campaign-item', dataset: { position: String(it.position ?? ''), status: st } },
      h('td', { class: 'num', text: fmtNumber(countOf(it.position) + 1) }),
      where,
      h('td', null, statusPill('item', st, 'campaign-item-status')),
      h('td', { class: 'num', testid: 'campaign-item-http', text: it.http_status ? String(it.http_status) : t('res_none') }),
      h('td', { class: 'num', text: fmtNumber(countOf(it.bytes)) }),
      h('td', null, link));
  });
  // Scrolled sideways where it is narrower than its columns (the drawer),
  // never clipped (SPEC U7).
  const table = rows.length ? h('div', { class: 'table-wrap' }, resTable('campaign-items',
    ['camp_col_pos', 'camp_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes', 'camp_col_evidence'],
    rows, [0, 3, 4])) : null;
  return h('div', { class: 'camp', testid: 'campaign', dataset: { status, live: String(CAMPAIGN_LIVE.has(status)) } },
    head, campaignBar(done, failed, rest), progress, detail, table);
}

function renderPlan() {
  const box = $('agent-plan-box');
  const list = clear($('agent-plan'));
  const plan = agent.plan;
  const progress = $('agent-plan-progress');
  if (!plan) {
    box.hidden = true;
    return;
  }
  const total = plan.steps.length;
  const done = Math.max(0, Math.min(total, Number.isFinite(plan.done) ? plan.done : 0));
  progress.textContent = t('agent_plan_progress', { done: fmtNumber(done), total: fmtNumber(total) });
  progress.dataset.done = String(done);
  progress.dataset.total = String(total);
  plan.steps.forEach((step, i) => {
    const st = i < done ? 'done' : (i === done ? 'current' : 'todo');
    list.append(h('li', { class: `agent-step step-${st}`, testid: 'agent-plan-step', dataset: { state: st }, text: step }));
  });
  box.hidden = false;
}

function renderCards() {
  const box = $('agent-cards-box');
  const list = clear($('agent-cards'));
  if (agent.cards.length === 0) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  for (const card of agent.cards) {
    const entry = card.result_id ? agent.results.get(card.result_id) : null;
    const open = Boolean(entry && entry.open);
    const toggle = card.result_id
      ? h('button', { type: 'button', class: 'more agent-card-open', testid: 'agent-card-open', 'aria-expanded': String(open), text: t(open ? 'agent_card_close' : 'agent_card_open') })
      : null;
    if (toggle) toggle.addEventListener('click', () => toggleResult(card));
    list.append(h('li', { class: 'agent-card', testid: 'agent-card', dataset: { tool: card.tool_id, status: card.status, resultId: card.result_id ?? '' } },
      h('div', { class: 'agent-card-head' },
        h('code', { class: 'agent-card-tool', testid: 'agent-card-tool', text: card.tool_id }),
        statusPill('rs', card.status, 'agent-card-status'),
        toggle),
      card.observations.length
        ? h('ul', { class: 'agent-observations', testid: 'agent-card-observations' }, card.observations.map((o) => h('li', { text: o })))
        : null,
      card.diagnostic
        ? h('p', { class: 'small agent-diagnostic', testid: 'agent-card-diagnostic' },
          h('span', { class: 'muted', text: `${t('agent_card_diagnostic')} : ` }), card.diagnostic)
        : null,
      open ? renderResult(entry) : null));
  }
}

function artifactText(a) {
  const d = a ? a.data : null;
  if (a && a.kind === 'excerpt' && d && typeof d.text === 'string') return d.text;
  let s;
  try {
    s = JSON.stringify(d, null, 2) ?? '';
  } catch {
    s = String(d);
  }
  return s.length > AGENT_ARTIFACT_PREVIEW ? `${s.slice(0, AGENT_ARTIFACT_PREVIEW)}\n${t('agent_result_truncated')}` : s;
}

// A sandbox run (SPEC X1): how it ended, what it used, its inputs, its
// streams and the files it left — all untrusted, all shown as text.
function renderSandboxRun(data) {
  const run = data?.run ?? {};
  const end = run.end ?? {};
  const endText = end.kind === 'exited' ? t('sbx_end_exited', { code: String(end.code) })
    : end.kind === 'signalled' ? t('sbx_end_signalled', { signal: String(end.signal) })
      : t('sbx_end_stopped', { reason: String(end.reason ?? '') });
  const stream = (s, testid) => {
    const text = String(s?.text ?? '');
    const cut = s?.truncated ? `\n${t('sbx_stream_cut', { bytes: fmtBytes(Number(s.bytes) || 0) })}` : '';
    return h('pre', { class: 'agent-artifact-text', testid, text: text ? text + cut : t('sbx_empty') });
  };
  const inputs = Array.isArray(data?.inputs) ? data.inputs : [];
  const files = Array.isArray(run.files) ? run.files : [];
  const box = h('div', { class: 'sandbox-run', testid: 'sandbox-run', dataset: { end: String(end.kind ?? '') } },
    dl([
      [t('sbx_program'), h('code', { text: String(run.program ?? '') })],
      [t('sbx_end'), h('span', { testid: 'sandbox-end', text: endText })],
      [t('sbx_usage'), t('sbx_usage_line', { ms: fmtNumber(Number(run.duration_ms) || 0), mem: fmtBytes(Number(run.peak_memory_bytes) || 0), cpu: fmtNumber(Number(run.cpu_ms) || 0) })],
      [t('sbx_inputs'), inputs.length
        ? h('ul', { class: 'sandbox-list small' }, inputs.map((i) => h('li', null, h('code', { text: String(i.path ?? '') }), ' ', refList([i.evidence_id]))))
        : t('sbx_empty')],
    ], 'sandbox-meta'),
    h('p', { class: 'small muted', text: t('sbx_stdout') }), stream(run.stdout, 'sandbox-stdout'),
    h('p', { class: 'small muted', text: t('sbx_stderr') }), stream(run.stderr, 'sandbox-stderr'));
  if (files.length) {
    box.append(h('p', { class: 'small muted', text: t('sbx_files') }),
      h('ul', { class: 'sandbox-list small', testid: 'sandbox-files' }, files.map((f) => h('li', { testid: 'sandbox-file' },
        h('details', null,
          h('summary', null, h('code', { text: String(f.name ?? '') }), ` · ${fmtBytes(Number(f.size) || 0)} · `, fingerprintEl(f.sha256)),
          h('pre', { class: 'agent-artifact-text', text: typeof f.text === 'string' ? f.text : t('sbx_no_text') }))))));
  }
  if (Number(run.files_unlisted) > 0) box.append(h('p', { class: 'small muted', text: t('sbx_files_more', { n: fmtNumber(Number(run.files_unlisted)) }) }));
  return box;
}

function renderResult(entry) {
  const box = h('div', { class: 'agent-result', testid: 'agent-result' });
  if (entry.loading && !entry.data) {
    box.append(h('p', { class: 'muted small', text: t('agent_result_loading') }));
    return box;
  }
  if (entry.error) {
    box.append(h('p', { class: 'error-box', testid: 'agent-result-error', text: errorText(entry.error) }));
    return box;
  }
  const r = entry.data || {};
  box.dataset.resultId = String(r.result_id ?? '');
  box.append(dl([
    [t('agent_result_refs'), refList(r.object_refs, 'agent-result-refs')],
    [t('agent_result_provenance'), refList(r.provenance_refs, 'agent-result-provenance')],
    [t('agent_review_risk'), riskPill(r.risk_level)],
    [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint)],
  ], 'agent-result-meta'));
  for (const a of Array.isArray(r.artifacts) ? r.artifacts : []) {
    const untrusted = a && a.trust === 'UNTRUSTED_DATA';
    box.append(h('div', { class: 'agent-artifact', dataset: { kind: String(a?.kind ?? ''), trust: String(a?.trust ?? '') } },
      h('p', { class: 'small' },
        h('span', { class: 'pill', text: String(a?.kind ?? '?') }), ' ',
        h('span', { class: `pill ${untrusted ? 'trust-untrusted' : 'trust-labfy'}`, text: t(untrusted ? 'agent_result_untrusted' : 'agent_result_trusted') })),
      a?.kind === 'sandbox_output'
        ? renderSandboxRun(a.data)
        : h('pre', { class: 'agent-artifact-text', testid: 'agent-artifact-text', text: artifactText(a) })));
  }
  return box;
}

// The runtime's fixed lines in the chosen language (SPEC U4); tool ids,
// codes and reasons stay as written.
const RUNTIME_DETAILS = [
  [/^the demo agent made (\d+) calls through the gateway$/, (m) => t('rtd_demo_calls', { n: fmtNumber(Number(m[1])) })],
  [/^cancelled by the analyst$/, () => t('rtd_cancelled_by_analyst')],
  [/^the agent runtime closed$/, () => t('rtd_runtime_closed')],
  [/^interrupted by restart$/, () => t('rtd_interrupted')],
  [/^start$/, () => t('rtd_start')],
  [/^resume$/, () => t('rtd_resume')],
  [/^Demo$/, () => t('rtd_driver_demo')],
  [/^LocalModel$/, () => t('rtd_driver_local')],
  [/^refused: the resume summary is the gateway's$/, () => t('rtd_answer_refused')],
  [/^no answer: the resume summary is the gateway's$/, () => t('rtd_answer_none')],
  // `tool.result`: "<tool>: <ResultStatus>[ — diagnostic]" (the runtime
  // writes the status as its Rust name); the tool id and diagnostic stay.
  [/^([a-z][a-z0-9_.]*): (Completed|Failed|Denied|AuthorizationRequired|Unavailable|Cancelled)(?: — ([\s\S]*))?$/,
    (m) => t('rtd_tool_result', { tool: m[1], status: enumLabel('rs', screaming(m[2])) }) + (m[3] !== undefined ? ` — ${m[3]}` : '')],
  // A turn's end: "<RuntimeStatus>: <summary or reason>".
  [/^(Completed|Failed|AuthorizationRequired|Cancelled|ModelUnavailable|ModelProtocolError|BudgetExhausted): ([\s\S]*)$/,
    (m) => t('rtd_turn_end', { status: capitalise(enumLabel('turn', screaming(m[1]))), detail: m[2] })],
];

// `AuthorizationRequired` → `AUTHORIZATION_REQUIRED`.
function screaming(name) {
  return name.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

function capitalise(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}

function runtimeDetail(raw) {
  const known = RUNTIME_DETAILS.find(([re]) => re.test(raw));
  return known ? known[1](raw.match(known[0])) : raw;
}

function eventDetail(ev) {
  if (ev.source === 'runtime') return runtimeDetail(String(ev.detail ?? ''));
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  switch (ev.type) {
    case 'agent.turn.started':
      return String(p.question ?? '');
    case 'agent.plan.updated':
      return t('agent_plan_progress', { done: fmtNumber(p.done ?? 0), total: fmtNumber(Array.isArray(p.steps) ? p.steps.length : 0) });
    case 'agent.tool.requested':
      return [p.tool_id, p.purpose].filter((x) => x !== null && x !== undefined && x !== '').map(String).join(' — ');
    case 'agent.tool.started':
      return String(p.tool_id ?? '');
    case 'agent.tool.completed':
      return `${String(p.tool_id ?? '')} → ${enumLabel('rs', p.status)}`;
    case 'agent.authorization.required':
      return [p.research_request, p.message].filter(Boolean).map(String).join(' — ');
    case 'agent.turn.completed':
      return String(p.summary ?? '');
    case 'agent.error':
      return runtimeDetail(String(p.message ?? ''));
    default:
      return '';
  }
}

function renderActivity() {
  const box = $('agent-activity-box');
  const list = clear($('agent-activity'));
  if (agent.activity.length === 0 && !agent.missed) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  // The runtime's and the gateway's events, by time (a stable sort keeps
  // each log's own order); newest first.
  const when = (ev) => {
    const ms = Date.parse(String(ev.timestamp ?? ''));
    return Number.isNaN(ms) ? 0 : ms;
  };
  const items = agent.activity.slice().sort((a, b) => when(a) - when(b));
  for (let i = items.length - 1; i >= 0; i--) {
    const ev = items[i];
    const type = String(ev.type ?? '');
    const source = ev.source === 'runtime' ? 'runtime' : 'gateway';
    const key = source === 'runtime' ? `evrt_${type}` : `ev_${type}`;
    list.append(h('li', { class: `agent-activity-item source-${source}`, testid: 'agent-activity-item', dataset: { type, source, sequence: String(ev.sequence ?? '') } },
      clockTime(ev.timestamp),
      h('span', { class: 'agent-activity-type', text: hasLabel(key) ? t(key) : type }),
      h('span', { class: 'agent-activity-detail', text: eventDetail(ev) })));
  }
  if (agent.missed) list.append(h('li', { class: 'muted small', testid: 'agent-missed', text: t('agent_missed') }));
}

// ----- start

// The drawer (SPEC U3): open or closed as the analyst last left it; on a
// first visit, open only where it fits beside the page.
const AGENT_OPEN_KEY = 'labfy.agent.open';
const AGENT_DOCK_MIN_WIDTH = 1600; // from here the drawer sits beside the page (app.css)

function agentDrawerRemembered() {
  try {
    const v = window.localStorage.getItem(AGENT_OPEN_KEY);
    if (v === '1' || v === '0') return v === '1';
  } catch {
    // Storage may be disabled: the first-visit rule.
  }
  return window.innerWidth >= AGENT_DOCK_MIN_WIDTH;
}

// `remember`: the analyst chose (the first-visit rule is not a choice).
function setAgentOpen(open, { focus = false, remember = true } = {}) {
  $('agent-dock').hidden = !open;
  $('agent-toggle').setAttribute('aria-expanded', String(open));
  document.body.classList.toggle('agent-open', open);
  if (remember) {
    try {
      window.localStorage.setItem(AGENT_OPEN_KEY, open ? '1' : '0');
    } catch {
      // Not remembered; the choice still holds on this page.
    }
  }
  if (focus) (open ? $('agent-question') : $('agent-toggle')).focus();
}

function bindAgent() {
  setAgentOpen(agentDrawerRemembered(), { remember: false });
  $('agent-toggle').addEventListener('click', () => setAgentOpen($('agent-dock').hidden, { focus: true }));
  $('agent-close').addEventListener('click', () => setAgentOpen(false, { focus: true }));
  $('agent-dock').addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') setAgentOpen(false, { focus: true });
  });
  $('agent-form').addEventListener('submit', agentStart);
  $('agent-question').addEventListener('input', renderAgentForm);
  $('agent-cancel').addEventListener('click', agentCancel);
  $('agent-grant-form').addEventListener('submit', agentGrant);
  $('agent-refuse-form').addEventListener('submit', agentRefuse);
  $('agent-resume').addEventListener('click', agentResume);
  $('agent-revoke').addEventListener('click', agentRevoke);
}

// The runtime's status: the mode line. A local model that is not ready
// (loading, down) is asked again now and then, so the line follows it.
async function agentLoadStatus() {
  if (agent.statusTimer) {
    clearTimeout(agent.statusTimer);
    agent.statusTimer = null;
  }
  try {
    agent.status = await api('/api/v1/agent-runtime/status');
    agent.statusError = null;
  } catch (err) {
    agent.statusError = err;
  }
  renderAgentMode();
  const st = agent.status;
  if (!agent.statusError && st && st.driver === 'local_model' && st.ready !== true && !st.closed) {
    agent.statusTimer = setTimeout(agentLoadStatus, AGENT_STATUS_RETRY_MS);
  }
}

async function agentBoot() {
  renderAgent();
  agentLoadStatus();
  try {
    agent.catalog = await api('/api/v1/agent-tools/catalog');
    agent.catalogError = null;
  } catch (err) {
    agent.catalogError = err;
  }
  // The latest runtime turn of this workspace, from the runtime's event log
  // (read to its end, bounded), so that a reload finds a pending
  // authorization again.
  try {
    const events = [];
    let cursor = 0;
    let missed = false;
    for (let i = 0; i < RT_BOOT_PAGES; i++) {
      const page = await api(`/api/v1/agent-runtime/events?cursor=${cursor}&limit=${RT_EVENTS_PAGE}`);
      const got = Array.isArray(page.events) ? page.events : [];
      events.push(...got);
      missed = missed || Boolean(page.missed);
      const next = Number(page.next_cursor);
      if (!Number.isSafeInteger(next) || next < cursor) break;
      cursor = next;
      if (got.length < RT_EVENTS_PAGE) break;
    }
    const last = events.length ? String(events[events.length - 1].turn_id ?? '') : '';
    if (last && !agent.rt && !agent.starting) {
      let rt = null;
      try {
        rt = await api(`/api/v1/agent-runtime/turns/${seg(last)}`);
      } catch (err) {
        // Evicted since: nothing to show.
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      if (rt && !agent.rt && !agent.starting) {
        agentSetRuntimeTurn(rt, 0);
        for (const ev of events) if (String(ev.turn_id ?? '') === last) rtIngest(ev);
        if (missed) agent.missed = true;
      }
    }
    if (cursor > agent.rtCursor) agent.rtCursor = cursor;
  } catch (err) {
    agent.pollError = err;
  }
  renderAgent();
  // One poll reads its gateway turn's plan and cards; it goes on while the
  // turn is live.
  if (agent.rt && !agent.pollError) agentPoll();
  else agentSchedule();
}

// ---------------------------------------------------------------------------
// Resources panel (SPEC Q5): the Resource Governor's state, polled while the
// panel is open and the page visible, drawn as a live chart — an SVG built element by element,
// no library — with the reservations against usage, then the current
// figures, the governor's facts, the reservations, the local model and the
// admission log. Every string from the governor is text (textContent).
//
// The chart: one solid line per resource, its use as a share of its total
// (0–100 %): RAM used, swap used, VRAM and GTT used summed over the GPUs
// (only when a GPU reports them), the scratch space Labfy itself holds. A
// dashed line of the same colour, while some reservation holds that
// resource, is where use would stand if every reservation grew to what it
// reserved: (used + Σ max(0, reserved − measured peak)) / total — the whole
// reservation while nothing is measured. GTT has no ledger amount, so no
// dashes. A point is one governor sample (deduplicated on its time), so the
// chart keeps the governor's pace; a gap in the samples is a gap in the line.

const RES_POLL_MS = 2000;
// The chart shows the last 30 minutes: the governor's history (a point every
// 5 s, kept by the governor for an hour: SPEC U6) up to the page's first
// poll, then each sample polled.
const RES_WINDOW_MS = 30 * 60 * 1000;
const RES_HISTORY_MAX = 1500; // points kept in memory (30 min of 2 s polls, and history)
const RES_GRID_STEP_MIN = 5; // a grid line every 5 minutes
const RES_STALE_MIN_MS = 10000; // a sample older than this (or 3 periods) is old
const RES_STALE_PERIODS = 3;
const RES_LOG_MAX = 100; // admission decisions shown, latest first
const RES_SERIES = ['ram', 'swap', 'vram', 'gtt', 'scratch'];
const RES_LEDGER = ['vram', 'ram', 'swap', 'scratch']; // the governor's `Amounts`
const SVG_NS = 'http://www.w3.org/2000/svg';
const CHART = { w: 720, h: 210, left: 46, right: 10, top: 10, bottom: 24 };
const BYTE_UNITS = { fr: ['o', 'Kio', 'Mio', 'Gio', 'Tio', 'Pio'], en: ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'] };

const res = {
  booted: false, // the session is up: polls may start
  timer: null,
  polling: false,
  points: [], // { at, values: { ram: { use, line } | null, … } }, oldest first
  history: null, // null: not asked yet; then the number of points the governor gave
  last: null, // { available: true, state } | { available: false, detail }
  error: null, // a failed poll: tracking stops until the analyst resumes it
};

function fmtBytes(n) {
  let v = Number(n);
  if (n === null || n === undefined || !Number.isFinite(v)) return t('res_none');
  const units = BYTE_UNITS[lang] || BYTE_UNITS.fr;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  const digits = i === 0 ? 0 : 1;
  return `${new Intl.NumberFormat(LOCALES[lang], { maximumFractionDigits: digits }).format(v)} ${units[i]}`;
}

// `fraction` in 0–1.
function fmtPercent(fraction, digits = 0) {
  const v = Number(fraction);
  if (fraction === null || fraction === undefined || !Number.isFinite(v)) return t('res_none');
  return new Intl.NumberFormat(LOCALES[lang], { style: 'percent', maximumFractionDigits: digits }).format(v);
}

function fmtDecimal(n, digits = 1) {
  const v = Number(n);
  if (n === null || n === undefined || !Number.isFinite(v)) return t('res_none');
  return new Intl.NumberFormat(LOCALES[lang], { maximumFractionDigits: digits }).format(v);
}

function num(v) {
  const n = Number(v);
  return v === null || v === undefined || !Number.isFinite(n) ? null : n;
}

function ratio(used, total) {
  if (used === null || total === null || total <= 0) return null;
  return Math.min(1, Math.max(0, used / total));
}

// A <time> for a Unix time in milliseconds.
function msTime(ms, withDate = false) {
  const d = new Date(Number(ms));
  if (Number.isNaN(d.getTime())) return h('time', { text: String(ms ?? '') });
  const opts = withDate ? { dateStyle: 'short', timeStyle: 'medium' } : { timeStyle: 'medium' };
  const iso = d.toISOString();
  return h('time', { datetime: iso, title: iso, text: new Intl.DateTimeFormat(LOCALES[lang], opts).format(d) });
}

// Non-zero amounts of a ledger `Amounts`, as text.
function amountsText(a) {
  if (!a || typeof a !== 'object') return t('res_none');
  const parts = RES_LEDGER.filter((k) => num(a[k])).map((k) => `${t(`res_amount_${k}`)} ${fmtBytes(a[k])}`);
  return parts.length ? parts.join(' · ') : t('res_none');
}

function resList(value) {
  return Array.isArray(value) ? value.filter((x) => x && typeof x === 'object') : [];
}

// Used / total / reservations of each charted resource in one state; a
// resource the sample does not report is null.
function resFigures(st) {
  const sample = st && st.sample && typeof st.sample === 'object' ? st.sample : null;
  const reserved = { vram: 0, ram: 0, swap: 0, scratch: 0 };
  const ahead = { vram: 0, ram: 0, swap: 0, scratch: 0 };
  for (const r of resList(st?.reservations)) {
    for (const k of RES_LEDGER) {
      const amount = num(r.reserved?.[k]) ?? 0;
      reserved[k] += amount;
      ahead[k] += Math.max(0, amount - (num(r.measured_peak?.[k]) ?? 0));
    }
  }
  const admissible = st?.admissible && typeof st.admissible === 'object' ? st.admissible : {};
  const fig = (key, used, total, extra) => (used === null || total === null || total <= 0 ? null : {
    key, used, total, reserved: reserved[key] ?? null, ahead: ahead[key] ?? 0, admissible: num(admissible[key]), ...extra,
  });
  const out = { ram: null, swap: null, vram: null, gtt: null, scratch: null };
  if (!sample) return out;
  const host = sample.host || {};
  out.ram = fig('ram', num(host.ram_used), num(host.ram_total));
  out.swap = fig('swap', num(host.swap_used), num(host.swap_total));
  let vu = null; let vt = null; let gu = null; let gt = null;
  for (const g of resList(sample.gpus)) {
    if (num(g.vram_used) !== null && num(g.vram_total) !== null) {
      vu = (vu ?? 0) + num(g.vram_used);
      vt = (vt ?? 0) + num(g.vram_total);
    }
    if (num(g.gtt_used) !== null && num(g.gtt_total) !== null) {
      gu = (gu ?? 0) + num(g.gtt_used);
      gt = (gt ?? 0) + num(g.gtt_total);
    }
  }
  out.vram = fig('vram', vu, vt);
  out.gtt = fig('gtt', gu, gt, { reserved: null, ahead: 0, admissible: null });
  const sc = sample.scratch && typeof sample.scratch === 'object' ? sample.scratch : null;
  if (sc) out.scratch = fig('scratch', num(sc.labfy_used), num(sc.total), { free: num(sc.free), path: String(sc.path ?? '') });
  return out;
}

function resPointValues(st) {
  const figures = resFigures(st);
  const values = {};
  for (const k of RES_SERIES) {
    const f = figures[k];
    values[k] = f ? {
      use: ratio(f.used, f.total),
      line: f.reserved ? ratio(f.used + f.ahead, f.total) : null,
    } : null;
  }
  return values;
}

function resPeriod() {
  const p = num(res.last?.state?.sample_period_ms);
  return p && p > 0 ? p : RES_POLL_MS;
}

// How long without a sample before a line breaks or a sample is called old.
function resStaleMs() {
  return Math.max(RES_STALE_MIN_MS, RES_STALE_PERIODS * Math.max(resPeriod(), RES_POLL_MS));
}

// ----- polling

function resIngest(data) {
  if (data && data.available === true && data.state && typeof data.state === 'object') {
    res.last = { available: true, state: data.state };
    const sample = data.state.sample;
    const at = num(sample?.at_ms);
    if (sample && typeof sample === 'object' && at !== null) {
      const prev = res.points[res.points.length - 1];
      if (prev && at < prev.at) res.points = []; // the clock went back: start over
      if (!prev || at !== prev.at) {
        res.points.push({ at, values: resPointValues(data.state) });
        if (res.points.length > RES_HISTORY_MAX) res.points.splice(0, res.points.length - RES_HISTORY_MAX);
      }
    }
  } else {
    res.last = { available: false, detail: String(data?.detail ?? '') };
  }
}

// The governor's history points, as the chart's points: before the first
// polled one, never replacing it. The dashed line shows where some of a
// reservation is still ahead of its run's use.
function resSeed(data) {
  const points = data && data.available === true ? resList(data.history?.points) : [];
  const first = res.points.length ? res.points[0].at : Infinity;
  const seeded = [];
  for (const p of points) {
    const at = num(p.at_ms);
    if (at === null || at >= first) continue;
    const values = {};
    for (const key of RES_SERIES) {
      const g = p[key];
      const used = num(g?.used);
      const total = num(g?.total);
      if (used === null || total === null || total <= 0) {
        values[key] = null;
        continue;
      }
      const ahead = key === 'gtt' ? 0 : (num(p.ahead?.[key]) ?? 0);
      values[key] = { use: ratio(used, total), line: ahead > 0 ? ratio(used + ahead, total) : null };
    }
    seeded.push({ at, values });
  }
  res.history = seeded.length;
  res.points = [...seeded, ...res.points].slice(-RES_HISTORY_MAX);
}

function resSetPollingAttr() {
  $('resources-panel').dataset.polling = String(Boolean(res.timer) || res.polling);
}

// Polling runs only while someone can see it: the panel open, the page visible.
function resWatched() {
  return res.booted && $('resources-panel').open && !document.hidden;
}

function resSchedule() {
  if (!res.timer && !res.polling && !res.error && resWatched()) {
    res.timer = setTimeout(resPoll, RES_POLL_MS);
  }
  resSetPollingAttr();
}

function resStop() {
  if (res.timer) {
    clearTimeout(res.timer);
    res.timer = null;
  }
  resSetPollingAttr();
}

function resKick() {
  resStop();
  res.error = null;
  if (!res.polling) resPoll();
}

async function resPoll() {
  res.timer = null;
  if (res.polling || !resWatched()) {
    resSetPollingAttr();
    return;
  }
  res.polling = true;
  resSetPollingAttr();
  // Once per page: the governor's past, so the chart does not start empty.
  if (res.history === null) {
    res.history = 0;
    try {
      resSeed(await api('/api/v1/resources/history'));
    } catch {
      // No past: the chart starts with the first poll, as before.
    }
  }
  let data;
  try {
    data = await api('/api/v1/resources');
  } catch (err) {
    // A lost session or a stopped server: say so and stop, like the agent
    // panel; an absent governor is not an error (`available: false`).
    res.polling = false;
    res.error = err;
    resSetPollingAttr();
    renderResources();
    return;
  }
  res.polling = false;
  resIngest(data);
  renderResources();
  resSchedule();
}

// ----- rendering

function svgEl(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') el.textContent = shown(value);
    else if (name === 'testid') el.setAttribute('data-testid', String(value));
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) if (child) el.append(child);
  return el;
}

function resFresh() {
  if (res.error || !res.last || !res.last.available) return false;
  const at = num(res.last.state?.sample?.at_ms);
  return at !== null && Date.now() - at <= resStaleMs();
}

function renderResChart() {
  const box = clear($('resources-chart'));
  const { w, h: height, left, right, top, bottom } = CHART;
  const pw = w - left - right;
  const ph = height - top - bottom;
  const now = Date.now();
  const from = now - RES_WINDOW_MS;
  const x = (at) => left + ((at - from) / RES_WINDOW_MS) * pw;
  const y = (v) => top + (1 - v) * ph;
  const fresh = resFresh();
  const minutes = Math.round(RES_WINDOW_MS / 60000);
  const chart = svgEl('svg', {
    class: `res-svg${fresh ? '' : ' is-stale'}`,
    viewBox: `0 0 ${w} ${height}`,
    role: 'img',
    'aria-label': t('res_chart_label', { n: minutes }),
    testid: 'resources-svg',
  }, svgEl('title', { text: t('res_chart_label', { n: minutes }) }));
  const grid = svgEl('g', { class: 'res-grid' });
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    grid.append(svgEl('line', { x1: left, x2: w - right, y1: y(v), y2: y(v), class: v === 0 ? 'res-axis' : 'res-gridline' }),
      svgEl('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'res-label', text: fmtPercent(v) }));
  }
  for (let m = minutes; m >= 0; m -= RES_GRID_STEP_MIN) {
    const at = now - m * 60000;
    grid.append(svgEl('line', { x1: x(at), x2: x(at), y1: top, y2: top + ph, class: 'res-gridline' }),
      svgEl('text', {
        x: x(at), y: height - 6, 'text-anchor': m === 0 ? 'end' : (m === minutes ? 'start' : 'middle'),
        class: 'res-label', text: m === 0 ? t('res_now') : t('res_ago_min', { n: m }),
      }));
  }
  chart.append(grid);
  const visible = res.points.filter((p) => p.at >= from && p.at <= now + RES_POLL_MS);
  const breakMs = resStaleMs();
  let drawn = 0;
  for (const key of RES_SERIES) {
    for (const [field, cls] of [['line', 'res-reserved'], ['use', 'res-line']]) {
      // Runs of consecutive points that have a value and no gap between them.
      const runs = [];
      let run = [];
      let prevAt = null;
      for (const p of visible) {
        const v = p.values[key] ? p.values[key][field] : null;
        if (v === null || v === undefined || (prevAt !== null && p.at - prevAt > breakMs)) {
          if (run.length) runs.push(run);
          run = [];
        }
        if (v !== null && v !== undefined) run.push([x(Math.min(p.at, now)), y(v)]);
        prevAt = p.at;
      }
      if (run.length) runs.push(run);
      const g = svgEl('g', { class: `${cls} res-${key}`, 'data-series': key, 'data-kind': field });
      for (const r of runs) {
        if (r.length === 1) g.append(svgEl('circle', { cx: r[0][0], cy: r[0][1], r: 2 }));
        else g.append(svgEl('polyline', { points: r.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ') }));
      }
      if (runs.length) {
        chart.append(g);
        if (field === 'use') drawn += 1;
      }
    }
  }
  box.dataset.points = String(res.points.length);
  box.dataset.history = String(res.history ?? 0);
  box.dataset.oldest = res.points.length ? String(res.points[0].at) : '';
  box.dataset.visiblePoints = String(visible.length);
  box.dataset.series = String(drawn);
  box.dataset.fresh = String(fresh);
  box.append(chart);
}

function renderResLegend() {
  const list = clear($('resources-legend'));
  // The latest shares only while they are fresh: a past value is not shown as current.
  const last = resFresh() ? res.points[res.points.length - 1] : null;
  for (const key of RES_SERIES) {
    if (!res.points.some((p) => p.values[key])) continue;
    const v = last && last.values[key] ? last.values[key].use : null;
    list.append(h('li', { class: 'res-legend-item', testid: 'resources-legend-item', dataset: { series: key } },
      h('span', { class: `res-swatch res-${key}` }),
      h('span', { text: t(`res_series_${key}`) }),
      v === null ? null : h('span', { class: 'muted', text: fmtPercent(v, 1) })));
  }
  if (res.points.some((p) => RES_SERIES.some((k) => p.values[k] && p.values[k].line !== null))) {
    list.append(h('li', { class: 'res-legend-item', dataset: { series: 'reserved' } },
      h('span', { class: 'res-swatch res-swatch-dashed' }), h('span', { class: 'muted', text: t('res_legend_reserved') })));
  }
  if (res.points.length && !resFresh()) {
    list.append(h('li', { class: 'res-legend-item muted', dataset: { series: 'stale' } },
      h('span', { class: 'res-swatch res-swatch-stale' }), h('span', { text: t('res_legend_stale') })));
  }
}

// `numeric`: indexes of the columns aligned right.
function resTable(testid, headKeys, rows, numeric = []) {
  return h('table', { class: 'res-table', testid },
    h('thead', null, h('tr', null, ...headKeys.map((k, i) => h('th', { scope: 'col', class: numeric.includes(i) ? 'num' : null, text: t(k) })))),
    h('tbody', null, ...rows));
}

function renderResFigures(st) {
  const figures = resFigures(st);
  const rows = [];
  for (const key of RES_SERIES) {
    const f = figures[key];
    if (!f) continue;
    const name = key === 'scratch' && f.path
      ? h('td', null, t('res_series_scratch'), h('div', { class: 'muted small', text: t('res_scratch_free', { path: f.path, free: fmtBytes(f.free) }) }))
      : h('td', { text: t(`res_series_${key}`) });
    rows.push(h('tr', { testid: `res-row-${key}`, dataset: { used: String(f.used), total: String(f.total) } },
      name,
      h('td', { class: 'num', text: fmtBytes(f.used) }),
      h('td', { class: 'num', testid: `res-total-${key}`, text: fmtBytes(f.total) }),
      h('td', { class: 'num', text: fmtPercent(ratio(f.used, f.total), 1) }),
      h('td', { class: 'num', text: f.reserved === null ? t('res_none') : fmtBytes(f.reserved) }),
      h('td', { class: 'num', text: f.admissible === null ? t('res_none') : fmtBytes(f.admissible) })));
  }
  if (!figures.swap && num(st?.sample?.host?.swap_total) === 0) {
    rows.splice(figures.ram ? 1 : 0, 0, h('tr', { testid: 'res-row-swap', dataset: { used: '0', total: '0' } },
      h('td', { text: t('res_series_swap') }), h('td', { class: 'muted', colspan: '5', text: t('res_no_swap') })));
  }
  const psi = st?.sample?.host?.psi;
  return [
    resTable('resources-figures', ['res_col_resource', 'res_col_used', 'res_col_total', 'res_col_share', 'res_col_reserved', 'res_col_admissible'], rows, [1, 2, 3, 4, 5]),
    h('p', { class: 'muted small', testid: 'resources-psi', text: psi && typeof psi === 'object'
      ? t('res_psi', { some: `${fmtDecimal(psi.some_avg10, 2)} %`, full: `${fmtDecimal(psi.full_avg10, 2)} %` })
      : t('res_psi_none') }),
  ];
}

function renderResGpus(st) {
  const gpus = resList(st?.sample?.gpus);
  if (!gpus.length) return h('p', { class: 'muted small', testid: 'resources-no-gpu', text: t('res_no_gpu') });
  const pair = (used, total) => `${fmtBytes(used)} / ${fmtBytes(total)}`;
  return resTable('resources-gpus', ['res_col_gpu', 'res_col_vram', 'res_col_gtt', 'res_col_busy', 'res_col_temp', 'res_col_power', 'res_col_source'],
    gpus.map((g) => {
      const temp = num(g.temperature_mc);
      const power = num(g.power_uw);
      const busy = num(g.busy_percent);
      return h('tr', { testid: 'res-gpu', dataset: { gpu: String(g.id ?? ''), vendor: String(g.vendor ?? '') } },
        h('td', null, h('strong', { text: String(g.id ?? '?') }), ' ', h('span', { class: 'muted small', text: `${String(g.vendor ?? '')} · ${String(g.name ?? '')}` }),
          g.uma ? h('div', { class: 'muted small', text: t('res_uma') }) : null),
        h('td', { class: 'num', text: pair(g.vram_used, g.vram_total) }),
        h('td', { class: 'num', text: pair(g.gtt_used, g.gtt_total) }),
        h('td', { class: 'num', text: busy === null ? t('res_none') : fmtPercent(busy / 100) }),
        h('td', { class: 'num', text: temp === null ? t('res_none') : `${fmtDecimal(temp / 1000)} °C` }),
        h('td', { class: 'num', text: power === null ? t('res_none') : `${fmtDecimal(power / 1e6)} W` }),
        h('td', { class: 'small', text: String(g.source ?? '') }));
    }), [1, 2, 3, 4, 5]);
}

function renderResFacts(st) {
  const facts = Array.isArray(st?.sample?.facts) ? st.sample.facts : [];
  if (!facts.length) return h('p', { class: 'muted small', testid: 'resources-facts', text: t('res_no_facts') });
  return h('ul', { class: 'res-facts', testid: 'resources-facts' },
    ...facts.map((f) => h('li', { testid: 'resources-fact', text: String(f) })));
}

function renderResReservations(st) {
  const list = resList(st?.reservations);
  if (!list.length) return h('p', { class: 'muted small', testid: 'resources-reservations', text: t('res_no_reservations') });
  return resTable('resources-reservations', ['res_col_owner', 'res_col_kind', 'res_col_reserved', 'res_col_peak', 'res_col_priority', 'res_col_lease'],
    list.map((r) => h('tr', { testid: 'res-reservation', dataset: { id: String(r.id ?? ''), kind: String(r.kind ?? '') } },
      h('td', null, h('code', { text: String(r.owner ?? '') })),
      h('td', { text: enumLabel('res_kind', r.kind) }),
      h('td', { text: amountsText(r.reserved) }),
      h('td', { text: r.measured_peak ? amountsText(r.measured_peak) : t('res_none') }),
      h('td', { class: 'num', text: fmtNumber(r.priority) }),
      h('td', null, num(r.lease_expires_ms) === null ? t('res_lease_process') : msTime(r.lease_expires_ms, true)))), [4]);
}

function renderResModel(st) {
  const m = st?.model;
  if (!m || typeof m !== 'object') return null;
  const e = m.estimate && typeof m.estimate === 'object' ? m.estimate : {};
  return section('res_model', 'resources-model', dl([
    [t('res_model_state'), h('span', { class: `pill status-${cssToken(m.state)}`, text: String(m.state ?? '') }), 'resources-model-state'],
    [t('res_model_endpoint'), m.endpoint ? h('code', { text: String(m.endpoint) }) : t('res_none')],
    [t('res_model_estimate'), [amountsText(e.reserved), h('div', { class: 'muted small', text: t('res_model_estimate_parts', {
      weights: fmtBytes(e.weights), kv: fmtBytes(e.kv_cache), overhead: fmtBytes(e.overhead), ctx: fmtNumber(e.context),
    }) })]],
    [t('res_model_peak'), fmtBytes(m.peak_memory)],
    [t('res_model_restarts'), fmtNumber(m.restarts ?? 0)],
    [t('res_model_detail'), String(m.detail ?? '')],
  ]));
}

function renderResLog(st) {
  const decisions = resList(st?.decisions).slice(-RES_LOG_MAX).reverse();
  if (!decisions.length) return h('p', { class: 'muted small', testid: 'resources-log', text: t('res_no_decisions') });
  return resTable('resources-log', ['res_col_time', 'res_col_owner', 'res_col_decision', 'res_col_asked', 'res_col_reason', 'res_col_blocked'],
    decisions.map((d) => {
      // What happened, in words that match it (SPEC U6): a reservation
      // released at the end of its run is not a refusal.
      const outcome = String(d.outcome ?? '');
      const blocked = Array.isArray(d.blocked_by) ? d.blocked_by.map((b) => String(b)) : [];
      return h('tr', { testid: 'res-decision', dataset: { outcome } },
        h('td', null, msTime(d.at_ms)),
        h('td', null, h('code', { text: String(d.owner ?? '') }), ' ', h('span', { class: 'muted small', text: enumLabel('res_kind', d.kind) })),
        h('td', null, h('span', { class: `pill res-outcome-${cssToken(outcome)}`, testid: 'res-outcome', text: enumLabel('res_outcome', outcome) })),
        h('td', { class: 'small', text: amountsText(d.asked) }),
        h('td', { text: String(d.reason ?? '') }),
        h('td', { class: 'small', text: blocked.length ? blocked.join(', ') : t('res_none') }));
    }));
}

function renderResStatus() {
  const el = clear($('resources-status'));
  el.className = 'small res-status';
  if (res.error) {
    el.dataset.state = 'error';
    el.classList.add('error-box');
    const retry = h('button', { type: 'button', class: 'more', testid: 'resources-retry', text: t('res_poll_retry') });
    retry.addEventListener('click', resKick);
    el.append(h('p', { text: t('res_poll_stopped', { message: errorText(res.error) }) }), retry);
  } else if (!res.last) {
    el.dataset.state = 'loading';
    el.classList.add('muted');
    el.textContent = t('loading');
  } else if (!res.last.available) {
    el.dataset.state = 'unavailable';
    el.classList.add('muted');
    el.textContent = t('res_unavailable', { detail: res.last.detail });
  } else {
    const st = res.last.state;
    const at = num(st.sample?.at_ms);
    if (at === null) {
      el.dataset.state = 'no-sample';
      el.classList.add('muted');
      el.textContent = t('res_no_sample');
    } else if (Date.now() - at > resStaleMs()) {
      el.dataset.state = 'old';
      el.classList.add('error-box');
      el.textContent = t('res_sample_old', { age: fmtNumber(Math.round((Date.now() - at) / 1000)) });
    } else {
      el.dataset.state = 'fresh';
      el.classList.add('muted');
      append(el, resSampleLine(at));
    }
  }
}

// "Échantillon de <time> · période 2 s · …" with the time as a <time>.
function resSampleLine(at) {
  // `{time}` is left in place by t() (not in vars), then swapped for the element.
  const text = t('res_sample', { period: fmtDecimal(resPeriod() / 1000), n: fmtNumber(res.points.length) });
  const [before, after = ''] = text.split('{time}');
  return [before, msTime(at), after];
}

function renderResources() {
  const panel = $('resources-panel');
  panel.dataset.available = res.last ? String(Boolean(res.last.available)) : '';
  if (!panel.open) return; // drawn when opened; the history is kept meanwhile
  renderResStatus();
  renderResChart();
  renderResLegend();
  const details = clear($('resources-details'));
  const st = res.last && res.last.available ? res.last.state : null;
  details.dataset.fresh = String(resFresh());
  if (!st) return;
  const pressure = st.pressure === null || st.pressure === undefined ? null : String(st.pressure);
  // SPEC D1/D2: a governor that cannot confine says so here, never a silent
  // demo-only appliance. Its reason is the governor's own words.
  const conf = st.confinement && typeof st.confinement === 'object' ? st.confinement : null;
  append(details, [
    pressure ? h('p', { class: 'error-box', testid: 'resources-pressure', role: 'alert', text: t('res_pressure', { reason: pressure }) }) : null,
    conf && conf.ready === false ? h('div', { class: 'error-box', testid: 'resources-confinement', role: 'alert' },
      h('p', { text: t('res_no_confinement') }),
      h('p', null, h('code', { text: String(conf.detail ?? '') })),
      h('p', { class: 'small', text: t('res_no_confinement_hint') })) : null,
    section('res_figures', 'resources-figures-panel', renderResFigures(st)),
    section('res_gpus', 'resources-gpus-panel', renderResGpus(st)),
    section('res_facts', 'resources-facts-panel', renderResFacts(st)),
    section('res_reservations', 'resources-reservations-panel', renderResReservations(st)),
    renderResModel(st),
    section('res_log', 'resources-log-panel', renderResLog(st)),
  ]);
}

function bindResources() {
  $('resources-panel').addEventListener('toggle', () => {
    // Opening asks at once (and retries after an error); closing stops.
    if (resWatched()) resKick();
    else resStop();
    renderResources();
  });
  document.addEventListener('visibilitychange', () => {
    if (!resWatched()) resStop();
    else if (!res.error) resKick();
  });
}

function resBoot() {
  res.booted = true;
  renderResources();
  if (resWatched()) resKick();
}

// ---------------------------------------------------------------------------
// arti's bootstrap phase (`BootstrapStatus`, English: `15%: connecting
// successfully; directory is fetching a consensus`) in the chosen language
// (SPEC U4): the percentage it repeats goes, each known fragment is
// translated, an unknown one stays as arti wrote it.
const TOR_PHASES_FR = [
  [/^handshaking with Tor relays$/, 'négociation avec les relais Tor'],
  [/^connecting successfully$/, 'connexion établie'],
  [/^connecting to the internet$/, 'connexion à Internet'],
  [/^not connected to the internet$/, 'pas de connexion à Internet'],
  [/^directory is fetching a consensus$/, 'l’annuaire télécharge un consensus'],
  [/^directory is fetching authority certificates \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les certificats des autorités ($1/$2)'],
  [/^directory is fetching microdescriptors \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les microdescripteurs ($1/$2)'],
  [/^directory is usable$/, 'l’annuaire est utilisable'],
];

function torPhase(phase) {
  const raw = String(phase ?? '').replace(/^\d+%:\s*/, '');
  if (lang !== 'fr') return raw;
  return raw.split(/;\s*/).map((part) => {
    const hit = TOR_PHASES_FR.find(([re]) => re.test(part));
    return hit ? part.replace(hit[0], hit[1]) : part;
  }).join(' ; ');
}

// Tor status line (SPEC E1): egress's bootstrap progress and phase, in the
// header, from GET /api/v1/egress — polled while the page is visible, more
// often while Tor is not ready. Egress's phase, errors and reasons are text.

const EGRESS_POLL_MS = 3000;
const EGRESS_POLL_READY_MS = 15000;

const eg = {
  booted: false,
  timer: null,
  polling: false,
  last: null, // { available: true, ready, bootstrap_percent, phase, … } | { available: false, detail }
  error: null, // a failed poll: polling stops until the page is shown again
};

function egressSchedule() {
  if (eg.timer || eg.polling || eg.error || !eg.booted || document.hidden) return;
  const ready = Boolean(eg.last && eg.last.available && eg.last.ready === true);
  eg.timer = setTimeout(egressPoll, ready ? EGRESS_POLL_READY_MS : EGRESS_POLL_MS);
}

function egressStop() {
  if (eg.timer) {
    clearTimeout(eg.timer);
    eg.timer = null;
  }
}

async function egressPoll() {
  eg.timer = null;
  if (eg.polling) return;
  eg.polling = true;
  try {
    eg.last = await api('/api/v1/egress');
    eg.error = null;
  } catch (err) {
    // A lost session or a stopped server: say so and stop (no retry loop
    // behind the analyst's back); showing the page again asks once more.
    eg.error = err;
  }
  eg.polling = false;
  renderEgress();
  egressSchedule();
}

function renderEgress() {
  const el = $('egress-status');
  if (!eg.booted) {
    el.hidden = true;
    return;
  }
  const e = eg.last;
  let st;
  let text;
  let title = '';
  if (eg.error) {
    st = 'error';
    text = t('egress_poll_error', { message: errorText(eg.error) });
  } else if (!e) {
    st = 'loading';
    text = t('egress_loading');
  } else if (e.available !== true) {
    st = 'unavailable';
    text = t('egress_unavailable', { reason: String(e.detail ?? '') });
  } else {
    const c = e.counts && typeof e.counts === 'object' ? e.counts : {};
    title = t('egress_title', {
      n: fmtNumber(countOf(e.in_flight)), fetched: fmtNumber(countOf(c.fetched)), refused: fmtNumber(countOf(c.refused)),
      unavailable: fmtNumber(countOf(c.unavailable)), failed: fmtNumber(countOf(c.failed)), stopped: fmtNumber(countOf(c.stopped)),
    });
    if (e.ready === true) {
      st = 'ready';
      text = t('egress_ready');
    } else {
      st = 'bootstrapping';
      text = t('egress_bootstrap', { p: fmtNumber(Math.min(100, countOf(e.bootstrap_percent))), phase: torPhase(e.phase) });
      // arti's error is its own English text: named in the badge, shown
      // whole in its tooltip (SPEC U4).
      if (e.last_error) {
        text = `${text} · ${t('egress_error_reported')}`;
        title = `${title}\n${t('egress_arti_error', { error: String(e.last_error) })}`;
      }
    }
  }
  el.textContent = shown(text);
  el.title = shown(title);
  el.className = `badge egress-badge egress-${st}`;
  el.dataset.state = st;
  el.dataset.percent = e && e.available === true ? String(Math.min(100, countOf(e.bootstrap_percent))) : '';
  el.hidden = false;
}

function bindEgress() {
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      egressStop();
    } else if (eg.booted && !eg.timer && !eg.polling) {
      eg.error = null;
      egressPoll();
    }
    if (!document.hidden) campaignSchedule();
  });
}

function egressBoot() {
  eg.booted = true;
  renderEgress();
  egressPoll();
}

// ---------------------------------------------------------------------------
// Start

async function boot() {
  bindChrome();
  bindAgent();
  bindResources();
  bindEgress();
  applyChrome();
  try {
    const session = await api('/api/v1/session');
    state.csrf = (typeof session.csrf_token === 'string' && session.csrf_token) || metaToken();
    state.workspaceId = session.workspace_id ?? null;
    state.isolation = session.isolation ?? null;
    const { workspaces = [] } = await api('/api/v1/workspaces');
    state.workspace = workspaces.find((w) => w.id === state.workspaceId) ?? workspaces[0] ?? null;
    if (!state.workspaceId && state.workspace) state.workspaceId = state.workspace.id;
    if (state.workspaceId) {
      const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
      state.investigations = investigations;
      const inUse = investigations.filter((i) => !i.archived_at);
      state.investigationId = (inUse[0] ?? investigations[0])?.id ?? null;
    }
  } catch (err) {
    state.csrf = state.csrf || metaToken();
    state.bootError = err;
  }
  state.booted = true;
  renderWorkspace();
  document.body.dataset.ready = 'true';
  route();
  if (state.bootError) {
    agent.catalogError = state.bootError;
    agent.statusError = state.bootError;
  }
  else {
    agentBoot();
    resBoot();
    egressBoot();
  }
  renderAgent();
}

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', boot, { once: true });
} else {
  boot();
}
